package cli

import (
	"strings"
	"testing"

	"github.com/kilnctl/kiln/tui"
)

// The wizard's hints are commands a user copies: each must parse as the
// command it names, with its flags, under kiln's real command tree (an
// unrunnable hint is exit 2 for whoever types it).
func TestWizardCreateProjectHintIsARunnableCommand(t *testing.T) {
	for _, tc := range []struct {
		target  tui.Target
		tenants []string
		flag    string
	}{
		{tui.Target{Provider: "kube", Name: "dev1", Location: "kind-dev1"}, []string{"staging", "default"}, "context"},
		{tui.Target{Provider: "aws", Name: "dev2", Location: "eu-west-1"}, nil, "region"},
		{tui.Target{Provider: "kube", Name: "dev3"}, []string{"default"}, ""},
	} {
		hint := tui.CreateProjectHint(tc.target, tc.tenants)
		t.Run(hint, func(t *testing.T) {
			fields := strings.Fields(strings.ReplaceAll(hint, "PROJECT", "blog"))
			if fields[0] != "kiln" {
				t.Fatalf("hint does not start with kiln: %q", hint)
			}
			root := NewRoot(BuildInfo{})
			cmd, rest, err := root.Find(fields[1:])
			if err != nil {
				t.Fatalf("%q: %v", hint, err)
			}
			if cmd.CommandPath() != "kiln project create" {
				t.Fatalf("%q runs %q", hint, cmd.CommandPath())
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Fatalf("%q: flags: %v", hint, err)
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Fatalf("%q: args: %v", hint, err)
			}
			args := cmd.Flags().Args()
			if args[0] != tc.target.Provider || args[1] != tc.target.Name {
				t.Errorf("%q: provider/name %v", hint, args)
			}
			wantTenant := "default"
			if len(tc.tenants) > 0 {
				wantTenant = tc.tenants[0]
			}
			if args[2] != wantTenant+"/blog" {
				t.Errorf("%q: project ref %q, want %s/blog", hint, args[2], wantTenant)
			}
			if tc.flag != "" {
				if v, _ := cmd.Flags().GetString(tc.flag); v != tc.target.Location {
					t.Errorf("%q: --%s is %q, want %q", hint, tc.flag, v, tc.target.Location)
				}
			}
		})
	}
}
