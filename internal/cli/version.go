package cli

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCmd(g *globals, info BuildInfo) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kiln's version, commit and build date",
		Example: `  kiln version
  kiln version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.output == "json" {
				return json.NewEncoder(g.stdout).Encode(map[string]string{
					"version": info.Version,
					"commit":  info.Commit,
					"date":    info.Date,
					"go":      runtime.Version(),
					"os":      runtime.GOOS,
					"arch":    runtime.GOARCH,
				})
			}
			_, err := fmt.Fprintf(g.stdout, "kiln %s (commit %s, built %s, %s %s/%s)\n",
				info.Version, info.Commit, info.Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
