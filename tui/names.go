package tui

import (
	"github.com/kilnctl/kiln/engine"
	"github.com/kilnctl/kiln/engine/input"
)

// Chosen is how the wizard's log lines say where a cluster's location came
// from: the create form's field or the selected cluster's row, never a
// flag.
const Chosen = "chosen in the wizard"

// InputName words an engine input as the wizard offers it: its own form
// fields and keys, never a CLI flag. The wizard's engine uses it as its
// Namer, so messages that tell the user what to give next name what the
// wizard has.
func InputName(in engine.Input) string {
	switch in {
	case engine.InputContinue:
		return "the Continue button (c on the home screen)"
	case engine.InputYes:
		return "the typed cluster name (d on the home screen)"
	case engine.InputTokenDir:
		return "the Token dir field of the create form (n)"
	case engine.InputConfig:
		return "the Config file field of the create form (n)"
	case engine.InputContext:
		return "the Context field of the create form (n)"
	case engine.InputContexts:
		return "the kubeconfig's contexts (the wizard searches all of them)"
	case engine.InputRegion:
		return "the Region field of the create form (n, provider aws)"
	case engine.InputRegions:
		return "the regions searched (the wizard searches every region)"
	case engine.InputProfile:
		return "the AWS profile field of the create form (n, provider aws)"
	case engine.InputInstanceType:
		return "the Node type (EC2 instance type) field of the create form (n, provider aws)"
	case engine.InputNodes:
		return "the Nodes field of the create form (n, provider aws)"
	case engine.InputDeleteProjects:
		return "the Delete projects option of the upgrade screen (u)"
	case engine.InputRestack:
		return "the Restack option of the upgrade screen (u)"
	case engine.InputKeepOld:
		return "the Keep old key field of the rotate key screen (K)"
	case engine.InputFinish:
		return "Finish rotation (K, while a rotation is under way)"
	case input.KubernetesVersion:
		return "the Kubernetes version field of the upgrade screen (u, provider aws)"
	case engine.InputAll:
		return "one project at a time (the wizard acts on the selected project)"
	case input.Admin:
		return "the admin access entries (the wizard keeps the cluster's as they are)"
	case input.Viewer:
		return "the viewer access entries (the wizard keeps the cluster's as they are)"
	case input.RotateToken:
		return "Rotate token (t on a project of the tenant)"
	case input.Probe:
		return "the gateway probe"
	case input.KeyringBackend:
		return "the keyring backend kiln was started with"
	}
	return string(in)
}

// Actions words the command a hint would give as the wizard's own action:
// the key that does it and where ("d destroy", "u upgrade with the config
// file kiln.yaml", "K rotate key, then Finish rotation", "t rotate token on
// default/blog"). The wizard's engine uses it as its Actions, so no hint
// it shows is a command line to type.
func Actions(verb, args []string) string {
	has := func(in engine.Input) bool {
		for _, a := range args {
			if a == engine.FlagName(in) {
				return true
			}
		}
		return false
	}
	config := ""
	for i, a := range args {
		if (a == "-c" || a == engine.FlagName(engine.InputConfig)) && i+1 < len(args) {
			config = args[i+1]
		}
	}
	withConfig := func(s string) string {
		switch config {
		case "":
			return s
		case "FILE":
			return s + " with a config file"
		}
		return s + " with the config file " + config
	}
	v := ""
	if len(verb) > 0 {
		v = verb[0]
	}
	switch v {
	case "destroy":
		return "d destroy"
	case "create":
		if has(engine.InputContinue) {
			return "c continue"
		}
		return withConfig("n new cluster")
	case "upgrade":
		s := withConfig("u upgrade")
		if has(engine.InputRestack) {
			s += ", Restack on"
		}
		if has(engine.InputDeleteProjects) {
			s += ", Delete projects on"
		}
		return s
	case "rotate-key":
		if has(engine.InputFinish) {
			return "K rotate key, then Finish rotation"
		}
		return "K rotate key"
	case "status", "inspect", "wait":
		return "i inspect"
	case "tokens":
		// The wizard changes no keyring entry: a hint to forget one is
		// left out (moving an unusable token dir aside is the fix it
		// gives).
		return ""
	case "project":
		op, on := "", ""
		if len(verb) > 1 {
			op = verb[1]
		}
		if len(args) > 0 {
			on = " on " + args[0]
		}
		key := map[string]string{engine.ProjectStart: "s start", engine.ProjectSuspend: "p suspend", engine.ProjectRestack: "r restack",
			engine.ProjectRotateToken: "t rotate token", engine.ProjectDelete: "x delete", engine.ProjectCreate: "n new project"}[op]
		if key == "" {
			key = "enter (the project's screen)"
		}
		return key + on
	}
	return "the wizard's " + v
}

// UpgradeInputName words an engine input as the upgrade screen offers it:
// the EKS fields of an aws cluster (Kubernetes version, Nodes, Node type)
// are that screen's, not the create form's; the rest as InputName. The
// wizard's engine uses it as its Namer for an upgrade.
func UpgradeInputName(in engine.Input) string {
	switch in {
	case input.KubernetesVersion:
		return "the Kubernetes version field of the upgrade screen (u, provider aws)"
	case engine.InputNodes:
		return "the Nodes field of the upgrade screen (u, provider aws)"
	case engine.InputInstanceType:
		return "the Node type (EC2 instance type) field of the upgrade screen (u, provider aws)"
	}
	return InputName(in)
}
