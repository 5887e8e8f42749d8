//go:build linux

package creds

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/godbus/dbus"
	"github.com/kilnctl/kiln/engine/input"
)

// What 99designs/keyring v1.2.2 does with the Secret Service, and why this
// file exists:
//
//   - It stores items in the collection named LibSecretCollectionName
//     (default: the service name, "kiln"), matched by object path
//     /org/freedesktop/secrets/collection/NAME. Aliases such as "default"
//     are not resolved.
//   - When that collection does not exist, Set creates it. gnome-keyring
//     answers with a prompt asking for the new keyring's password: a dialog
//     on a desktop; without a display the prompt is dismissed and the
//     library mistakes the empty result for a collection path, failing
//     with "Object does not exist at path /". Get and Keys on a missing
//     collection report "not found" / empty, so only the first write fails.
//   - A locked collection or item makes it run an unlock prompt and wait
//     for the answer with no deadline; it also ignores a dismissed prompt.
//
// So kiln never lets the library create or unlock anything: it uses the
// collection behind the "default" alias ("login" on desktops and under
// `gnome-keyring-daemon --unlock`), unlocks it itself with a deadline, and
// only then hands over. Store.do bounds every later call.

const (
	ssName       = "org.freedesktop.secrets"
	ssPath       = dbus.ObjectPath("/org/freedesktop/secrets")
	ssService    = "org.freedesktop.Secret.Service"
	ssCollection = "org.freedesktop.Secret.Collection"
	ssPrompt     = "org.freedesktop.Secret.Prompt"
	ssCollPrefix = "/org/freedesktop/secrets/collection/"
)

// unlockTimeout bounds an unlock prompt; a person has to type a password.
const unlockTimeout = 2 * time.Minute

// secretServiceMissing explains why the Secret Service backend is not
// linked in: the library registers it only if it could connect to a
// session bus when the program started.
func secretServiceMissing() string {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		return "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset)"
	}
	return "cannot connect to the D-Bus session bus"
}

// secretServiceCollection returns the name of the Secret Service collection
// kiln stores items in, unlocked. When activate is false (auto mode) a
// Secret Service that is not already running is reported as unavailable
// instead of being started by D-Bus activation.
func secretServiceCollection(activate bool) (string, error) {
	conn, err := dbus.SessionBus() // shared with the keyring library
	if err != nil {
		return "", fmt.Errorf("connect to the D-Bus session bus: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	running, err := nameHasOwner(ctx, conn, ssName)
	if err != nil {
		return "", err
	}
	if !running && !activate {
		return "", fmt.Errorf("no Secret Service running (%s is not on the session bus)", ssName)
	}

	var path dbus.ObjectPath
	call := conn.Object(ssName, ssPath).CallWithContext(ctx, ssService+".ReadAlias", 0, "default")
	if err := call.Store(&path); err != nil {
		return "", fmt.Errorf("read the Secret Service default collection: %w", err)
	}
	if path == "/" || path == "" {
		return "", errors.New("the Secret Service has no default collection (keyring); create one in your keyring manager, " +
			"or start gnome-keyring-daemon with --unlock, or choose " + input.FlagName(input.KeyringBackend) + " file")
	}
	name, ok := collectionName(path)
	if !ok {
		return "", fmt.Errorf("the Secret Service default collection has an unexpected object path %s", path)
	}

	locked, err := conn.Object(ssName, path).GetProperty(ssCollection + ".Locked")
	if err != nil {
		return "", fmt.Errorf("read state of Secret Service collection %q: %w", name, err)
	}
	if isLocked, _ := locked.Value().(bool); isLocked {
		if err := unlockCollection(conn, path); err != nil {
			return "", fmt.Errorf("unlock Secret Service collection %q: %w", name, err)
		}
	}
	return name, nil
}

func nameHasOwner(ctx context.Context, conn *dbus.Conn, name string) (bool, error) {
	var has bool
	call := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name)
	if err := call.Store(&has); err != nil {
		return false, fmt.Errorf("ask the session bus for %s: %w", name, err)
	}
	return has, nil
}

// collectionName turns a collection's object path into the name the keyring
// library matches it by: gnome-keyring escapes non-alphanumeric characters
// of a collection's name as _XX in its path, and the library un-escapes
// the path the same way (giving up on the whole path at a malformed escape).
func collectionName(path dbus.ObjectPath) (string, bool) {
	rest, ok := strings.CutPrefix(string(path), ssCollPrefix)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		if rest[i] != '_' {
			b.WriteByte(rest[i])
			continue
		}
		if i+3 > len(rest) {
			return rest, true
		}
		dec, err := hex.DecodeString(rest[i+1 : i+3])
		if err != nil {
			return rest, true
		}
		b.Write(dec)
		i += 2
	}
	return b.String(), true
}

// unlockCollection asks the Secret Service to unlock path and, when it needs
// a prompt (a password dialog on a desktop), waits for the prompt's answer
// up to unlockTimeout.
func unlockCollection(conn *dbus.Conn, path dbus.ObjectPath) error {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	var unlocked []dbus.ObjectPath
	var prompt dbus.ObjectPath
	call := conn.Object(ssName, ssPath).CallWithContext(ctx, ssService+".Unlock", 0, []dbus.ObjectPath{path})
	if err := call.Store(&unlocked, &prompt); err != nil {
		return err
	}
	if slices.Contains(unlocked, path) {
		return nil
	}
	if prompt == "/" || prompt == "" {
		return errors.New("the Secret Service refused to unlock it")
	}
	dismissed, err := runPrompt(ctx, conn, prompt)
	if err != nil {
		return err
	}
	if dismissed {
		return errors.New("the unlock prompt was dismissed or could not be shown (no display?)")
	}
	return nil
}

// runPrompt performs a Secret Service prompt and waits for its Completed
// signal, reporting whether it was dismissed. Unlike the keyring library it
// subscribes to the signal first, so the bus actually delivers it.
func runPrompt(ctx context.Context, conn *dbus.Conn, prompt dbus.ObjectPath) (bool, error) {
	match := []dbus.MatchOption{
		dbus.WithMatchObjectPath(prompt),
		dbus.WithMatchInterface(ssPrompt),
		dbus.WithMatchMember("Completed"),
	}
	if err := conn.AddMatchSignal(match...); err != nil {
		return false, fmt.Errorf("subscribe to prompt result: %w", err)
	}
	defer func() { _ = conn.RemoveMatchSignal(match...) }()
	signals := make(chan *dbus.Signal, 16)
	conn.Signal(signals)
	defer conn.RemoveSignal(signals)

	obj := conn.Object(ssName, prompt)
	if err := obj.CallWithContext(ctx, ssPrompt+".Prompt", 0, "").Err; err != nil {
		return false, fmt.Errorf("show prompt: %w", err)
	}
	for {
		select {
		case sig := <-signals:
			if sig.Path != prompt || sig.Name != ssPrompt+".Completed" || len(sig.Body) == 0 {
				continue
			}
			dismissed, _ := sig.Body[0].(bool)
			return dismissed, nil
		case <-ctx.Done():
			_ = obj.Call(ssPrompt+".Dismiss", dbus.FlagNoReplyExpected).Err
			return false, fmt.Errorf("no answer to the prompt within %s", unlockTimeout)
		}
	}
}
