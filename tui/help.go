package tui

import (
	"charm.land/bubbles/v2/key"
)

// explain says what a key does, for ? help: keyed by the key and its
// short help as the footer shows them ("s start"), so the help explains
// exactly the bindings the screen offers. A binding without an entry
// shows its short help alone (TestHelpExplainsEveryKey fails on one).
var explain = map[string]string{
	// home
	"n new":             "the create form: a new kiln cluster in a kubeconfig context or an AWS region, checked as you type",
	"c continue":        "continue the selected cluster's installed platform with its existing credentials: kiln reads what is there and asks before it changes anything",
	"i inspect":         "the live inspector of the cluster: its platform objects and projects, kept current from watches",
	"d destroy":         "remove the selected cluster's platform, each object verified gone, after you type its name; the token dir is moved aside, never deleted",
	"r refresh":         "discover the kiln clusters again, in every kubeconfig context (and every AWS region when AWS is set up)",
	"l last run":        "open the last run's view again: its resources and log",
	"↑/↓ select":        "move the selection; on the inspect screen it follows the project, not the row, through filters and updates",
	"q quit":            "leave kiln (nothing runs in the background)",
	"u upgrade":         "bring the platform to a config file, or re-apply the installed one: kiln shows the plan and asks before anything changes",
	"K rotate key":      "replace the cluster's signing key and sign every tenant token again with it; you confirm by typing the cluster name",
	"? help":            "this help",
	"esc back":          "back to the previous screen; nothing changes",
	"/ filter":          "type to narrow the project table to projects whose TENANT/PROJECT, state or stack contains the text",
	"o objects in full": "every platform object with its whole name and message (the screen shows the first few, cut to the width)",
	"enter project":     "open the selected project: its objects, token sync, reasons, pods, Events and followed log",
	// project actions
	"s start":               "start the selected project: its Deployment, Service and route made again in order, each verified ready (asks first)",
	"p suspend":             "suspend the selected project: route, Service and Deployment removed in that order, each verified gone (asks first); its token and spec stay",
	"r restack":             "suspend the selected project and start it on another of the platform's stacks, under one lock (asks which stack)",
	"n new project":         "the new project form: tenant and stack from the platform's config, the name checked as you type",
	"t rotate token":        "a new token for the selected project; its Deployment rolls to it and the old one stops working once the new one runs (asks first)",
	"x delete":              "delete the selected project and everything it owns, each object verified gone, after you type its name",
	"↑/↓ scroll":            "scroll the screen",
	"tab scroll events/log": "move ↑/↓ and pgup/pgdn from the page to the Events pane, the log pane and back",
	"tab the log":           "move the scroll keys to the log pane",
	"tab page":              "move the scroll keys back to the page",
	"end follow the log":    "follow the log again (scrolling back stops following)",
	"read-only no actions":  "kiln inspect --read-only: this inspector changes nothing",
	// filter
	"type filter projects": "the text narrows the table as you type",
	"enter keep filter":    "keep the filter and go back to the table's keys",
	"esc clear filter":     "clear the filter; the selection comes back",
	// questions
	"enter/y confirm": "run the operation the question names",
	"enter/y restack": "restack onto the stack shown",
	"←/→ stack":       "choose the stack to restack onto",
	"esc/n cancel":    "do not run it; nothing changes",
	// run view
	"↑/↓ select/scroll": "select a resource, or scroll the log when it has the focus",
	"tab resources/log": "move the focus between the resources and the log",
	"enter in full":     "the selected resource, or the whole log, in full",
	"end follow":        "follow the newest log lines again",
	"ctrl+c cancel":     "cancel the run: kiln asks, then stops at a safe point and says what it left",
	"pgup/pgdn page":    "scroll a page",
	"d destroy again":   "run destroy again: every step is idempotent, so it finishes what the interrupted run began",
	// final
	"l review the run":           "the run's resources and log",
	"enter/esc back to clusters": "the home screen",
	"ctrl+c quit":                "leave kiln",
	// forms
	"tab/↓ next":                   "the next field",
	"↑ previous":                   "the previous field",
	"←/→ context":                  "choose the kubeconfig context (kube) or the provider",
	"enter next/create":            "the next field; on Create, create",
	"tab/↓ next field":             "the next field",
	"↑ previous field":             "the previous field",
	"←/→ tenant/stack":             "choose the tenant or the stack (on those fields)",
	"esc back (nothing changes)":   "leave the form; nothing changes",
	"←/→/tab choose":               "move the focus between the answers",
	"enter confirm":                "give the focused answer",
	"esc cancel (nothing changes)": "answer no: nothing changes",
	"enter confirm typed name":     "go ahead when the typed name matches; otherwise say so",
	// upgrade and rotate key
	"space toggle option":  "turn the focused option on or off (restack running projects, delete removed tenants' projects)",
	"enter next/plan":      "the next field; on Plan, read the cluster and show what would change, nothing applied yet",
	"↑/↓ scroll the plan":  "scroll the plan's changes",
	"home/end top/bottom":  "the first or the last change of the plan",
	"tab/↑/↓ field/button": "move between the Keep old key field and the Continue button",
	"enter next/continue":  "the next field; on Continue (or Finish rotation), read the cluster's keys and ask you to type its name before anything changes",
	"pgup/pgdn scroll":     "scroll the screen",
}

// explained is k's help line: its short help and what it does.
func explained(b key.Binding) (keys, desc, long string) {
	h := b.Help()
	return h.Key, h.Desc, explain[h.Key+" "+h.Desc]
}
