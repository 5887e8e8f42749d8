package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/event"
	"github.com/kilnctl/kiln/internal/testenv/awsemu"
	"github.com/kilnctl/kiln/tui"
)

// flagWord is a CLI flag as a message would name it (--instance-type).
var flagWord = regexp.MustCompile(`--[a-z][a-z-]+`)

// TestWizardAWSInfrastructureFailureSpeaksWizard: an EKS create from the
// wizard whose region has no second zone offering the form's Node type
// fails in the infrastructure phase, on the emulator; every event the
// wizard gets — the aws provider's failed resource, the failed phase and
// the result — names the form's fields (Region, Node type), never a
// flag.
func TestWizardAWSInfrastructureFailureSpeaksWizard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the AWS emulator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const region = "ap-northeast-1"
	emu, err := awsemu.Start(ctx, awsemu.Options{Regions: []string{region}})
	if err != nil {
		t.Fatalf("start AWS emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	// One zone offers m7i.large; EKS needs subnets in two.
	emu.SetZones(region, []awsemu.Zone{
		{Name: region + "a", ID: "apne1-az1"},
		{Name: region + "b", ID: "apne1-az2", NotOffered: []string{"m7i.large"}},
	})
	d := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.Endpoint(), "AWS_ACCESS_KEY_ID": awsemu.AccessKeyID, "AWS_SECRET_ACCESS_KEY": awsemu.SecretAccessKey,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": filepath.Join(d, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(d, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "XDG_STATE_HOME": filepath.Join(d, "state"), "KUBECONFIG": filepath.Join(d, "kubeconfig"),
	} {
		t.Setenv(k, v)
	}

	var mu sync.Mutex
	var events []engine.Event
	sink := engine.SinkFunc(func(ev engine.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	// Discovery searches the emulator's one region only.
	b := &wizardOps{g: &globals{timeout: time.Minute, regions: []string{region}}}
	at := engine.ClusterRef{Provider: "aws", Name: "onezone", Location: region}
	err = b.Create(at, engine.Infra{InstanceType: "m7i.large"}, engine.CreateRequest{})(ctx, sink, nil)
	if err == nil {
		t.Fatal("the create succeeded with one usable zone")
	}

	mu.Lock()
	defer mu.Unlock()
	typeField := tui.InputName(engine.InputInstanceType)
	var failed, phase, result bool
	for _, ev := range events {
		msg := event.MessageOf(ev.Payload)
		if w := flagWord.FindString(msg); w != "" {
			t.Errorf("the wizard got %s naming %s: %+v", ev.Type(), w, ev.Payload)
		}
		named := strings.Contains(msg, "no second availability zone") && strings.Contains(msg, typeField)
		switch p := ev.Payload.(type) {
		case event.ResourceEvent:
			failed = failed || p.Status == engine.StatusFailed && named
		case event.PhaseEvent:
			phase = phase || p.Phase == engine.PhaseInfrastructure && p.State == engine.PhaseFailed && named
		case event.ResultEvent:
			result = result || named
		}
	}
	if !failed || !phase || !result {
		t.Errorf("want the failed resource (%v), the failed infrastructure phase (%v) and the result (%v) naming %q; events:", failed, phase, result, typeField)
		for _, ev := range events {
			t.Logf("%s %+v", ev.Type(), ev.Payload)
		}
	}
}
