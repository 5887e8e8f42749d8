package cli

import (
	"github.com/kilnctl/kiln/engine/failure"
	"github.com/spf13/cobra"
)

func newCompletionCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Example: `  source <(kiln completion bash)
  kiln completion zsh > "${fpath[1]}/_kiln"
  kiln completion fish > ~/.config/fish/completions/kiln.fish`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return failure.BadInput("completion: unknown shell %q; use bash, zsh, fish or powershell", args[0])
		},
	}
}
