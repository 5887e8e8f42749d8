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
	}
	return string(in)
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
