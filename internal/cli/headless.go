package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kilnctl/kiln/engine"
)

// headlessConfirmer answers from the flags: --continue and --yes. It never
// prompts, so automation gets exit 3 instead of a hang.
type headlessConfirmer struct {
	cont, yes bool
}

func (c headlessConfirmer) ConfirmContinue(context.Context, engine.ContinueQuestion) (bool, error) {
	return c.cont, nil
}

func (c headlessConfirmer) ConfirmDestroy(context.Context, engine.DestroyQuestion) (bool, error) {
	return c.yes, nil
}

// promptConfirmer asks on the terminal (used when stdin is a TTY and the
// operation runs without the wizard).
type promptConfirmer struct {
	in  *bufio.Reader
	out io.Writer
}

func (p promptConfirmer) ask(question string) bool {
	fmt.Fprintf(p.out, "%s [y/N] ", question)
	line, _ := p.in.ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes"
}

func (p promptConfirmer) ConfirmContinue(_ context.Context, q engine.ContinueQuestion) (bool, error) {
	fmt.Fprintf(p.out, "\nkiln platform %s is already installed in %s %s.\n", q.Name, q.Provider, q.Location)
	fmt.Fprintf(p.out, "  trusted keys: %s\n", strings.Join(q.TrustedKeyIDs, ", "))
	if q.TokenDir != "" {
		fmt.Fprintf(p.out, "  token dir:    %s (holds a trusted key)\n", q.TokenDir)
	} else {
		fmt.Fprintf(p.out, "  token dir:    none found with a trusted key\n")
	}
	fmt.Fprintf(p.out, "Continuing reuses the key the cluster already trusts; nothing is regenerated.\n")
	return p.ask("Continue with existing credentials?"), nil
}

func (p promptConfirmer) ConfirmDestroy(_ context.Context, q engine.DestroyQuestion) (bool, error) {
	fmt.Fprintf(p.out, "\nThis removes kiln cluster %s from %s %s: its platform and tenant namespaces %s.\n",
		q.Name, q.Provider, q.Location, strings.Join(q.Tenants, ", "))
	if q.Projects != "" {
		fmt.Fprintf(p.out, "Their %s are removed with them.\n", q.Projects)
	}
	fmt.Fprintf(p.out, "Type the cluster name to confirm: ")
	line, _ := p.in.ReadString('\n')
	return strings.TrimSpace(line) == q.Name, nil
}
