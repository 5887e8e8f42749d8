package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnctl/kiln/internal/exit"
)

func TestUnknownCommandIsExit2WithTheClosestCommand(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"creat", "kube", "dev1"}, "create"},
		{[]string{"destory", "aws", "dev1"}, "destroy"},
		{[]string{"stat"}, "status"},
		{[]string{"project", "strt", "kube", "dev1", "t/p"}, "start"},
		{[]string{"tokens", "lst"}, "list"},
		{[]string{"aws", "tokn"}, "token"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := NewRoot(BuildInfo{})
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append(tc.args, "--headless"))
			err := root.Execute()
			if exit.Code(err) != exit.BadInput {
				t.Fatalf("want exit 2, got %d: %v", exit.Code(err), err)
			}
			if !strings.Contains(err.Error(), "unknown command") || !strings.Contains(err.Error(), tc.suggest) {
				t.Errorf("message does not suggest %s: %v", tc.suggest, err)
			}
		})
	}
}

func TestRelativeTokenDirIsMadeAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := NewRoot(BuildInfo{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version", "--token-dir", "rel/tokens"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got := root.PersistentFlags().Lookup("token-dir").Value.String()
	if want := filepath.Join(wd, "rel", "tokens"); got != want {
		t.Errorf("--token-dir rel/tokens became %q, want %q", got, want)
	}
}
