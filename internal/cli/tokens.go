package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kilnctl/kiln/creds"
	"github.com/kilnctl/kiln/engine/failure"
)

func newTokensCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "List or forget the token directories kiln remembers in the keyring",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List keyring entries: cluster, location, token dir and key id (no secrets)",
		Example: `  kiln tokens list
  kiln tokens list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := g.openStore(nil)
			if err != nil {
				return err
			}
			entries, err := store.List()
			if err != nil {
				return err
			}
			if g.output == "json" {
				type row struct {
					Provider string `json:"provider"`
					Name     string `json:"name"`
					Location string `json:"location"`
					TokenDir string `json:"token_dir"`
					KeyID    string `json:"key_id"`
					State    string `json:"state"`
				}
				rows := []row{}
				for _, e := range entries {
					rows = append(rows, row{e.Provider, e.Name, e.Location, e.TokenDir, e.KeyID, dirState(e)})
				}
				return json.NewEncoder(g.stdout).Encode(map[string]any{"backend": store.Backend(), "entries": rows})
			}
			if len(entries) == 0 {
				fmt.Fprintf(g.stdout, "no clusters in the keyring (%s)\n", store.Backend())
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tNAME\tLOCATION\tTOKEN DIR\tKEY ID\tSTATE")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Provider, e.Name, e.Location, e.TokenDir, e.KeyID, dirState(e))
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "forget PROVIDER NAME",
		Short:   "Remove a cluster's keyring entry (the token dir itself stays on disk)",
		Example: `  kiln tokens forget kube dev1`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "kube" && args[0] != "aws" {
				return failure.BadInput("PROVIDER %q: must be kube or aws", args[0])
			}
			store, err := g.openStore(nil)
			if err != nil {
				return err
			}
			e, ok, err := store.Get(args[0], args[1])
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(g.stdout, "%s/%s is not in the keyring; nothing to forget\n", args[0], args[1])
				return nil
			}
			if err := store.Delete(args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "forgot %s/%s; its token dir %s is still on disk\n", args[0], args[1], e.TokenDir)
			return nil
		},
	})
	return cmd
}

// dirState reports what is on disk at an entry's token dir.
func dirState(e creds.Entry) string {
	td, err := creds.Load(e.TokenDir)
	if err != nil {
		return "unusable"
	}
	if td.Manifest.KeyID != e.KeyID {
		return "key changed"
	}
	return string(td.Manifest.State)
}

// openStore opens the keyring --keyring-backend names: the one way the
// commands, the completion and the wizard open it. ask, when set, reads
// the file keyring's passphrase when KILN_KEYRING_PASSPHRASE was not given
// (terminalPassphrase; nil where nobody may be asked: the wizard owns the
// terminal, a completion must not prompt).
func (g *globals) openStore(ask func(prompt string) (string, error)) (*creds.Store, error) {
	return creds.OpenStore(creds.StoreOptions{Backend: g.keyringBackend, EnvPassphrase: g.passphrase, Passphrase: ask})
}
