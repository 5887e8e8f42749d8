package cli

import "github.com/spf13/cobra"

// environmentVars are the variables kiln reads, with their meaning: the
// `kiln help environment` page. TestEnvironmentPageListsEveryVariable
// fails when the code reads one that is not here.
var environmentVars = []struct{ name, meaning string }{
	{"KILN_CONTEXTS", "comma-separated kubeconfig contexts discovery searches when --contexts is not given (kube)"},
	{"KILN_KEYRING_PASSPHRASE", "passphrase of the file keyring backend (needed without a terminal, and in the wizard)"},
	{"KILN_MEMORY_LIMIT", "kiln gateway: the container's memory limit in bytes (the platform sets it from the Deployment's limits); Go's soft memory limit becomes 90% of it"},
	{"GOMEMLIMIT", "Go's soft memory limit. kiln gateway: when set, KILN_MEMORY_LIMIT is ignored; status and project list: when unset, 180 MiB"},
	{"GOGC", "Go's garbage collection target; status and project list use 400 when it is unset (fewer collections while they read every project)"},
	{"KUBE_FEATURE_WatchListClient", "client-go's watch-list for informers; kiln sets it to false unless set (client-go retries a refused watch-list with no backoff)"},
	{"KILN_AWS_KUBE_CONTEXT", "kubeconfig context that reaches an EKS cluster's endpoint, as --kube-context-override (aws)"},
	{"KILN_AWS_LB_WAIT", "how long destroy aws waits for the cluster's LoadBalancer Services and Ingresses to be gone (their load balancers deleted), as a Go duration (default 5m)"},
	{"KUBECONFIG", "kubeconfig file(s) when --kubeconfig is not given (default ~/.kube/config)"},
	{"HOME", "where ~/.kube/config, ~/.aws/config and ~/.aws/credentials, and the XDG defaults below, are"},
	{"XDG_STATE_HOME", "base of the default token dirs: $XDG_STATE_HOME/kiln/PROVIDER/NAME/tokens (default ~/.local/state)"},
	{"XDG_DATA_HOME", "base of the file keyring: $XDG_DATA_HOME/kiln/keyring (default ~/.local/share)"},
	{"DBUS_SESSION_BUS_ADDRESS", "session bus of the secret-service keyring (Linux); unset means that backend is unavailable"},
	{"AWS_PROFILE", "AWS profile when --profile is not given; also tells kiln list that AWS is set up here"},
	{"AWS_ACCESS_KEY_ID", "static AWS credentials (with AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), read by the AWS SDK; also tells kiln list that AWS is set up"},
	{"AWS_SECRET_ACCESS_KEY", "see AWS_ACCESS_KEY_ID (never printed)"},
	{"AWS_SESSION_TOKEN", "see AWS_ACCESS_KEY_ID (never printed)"},
	{"AWS_REGION", "default AWS region (AWS SDK); AWS_DEFAULT_REGION likewise"},
	{"AWS_DEFAULT_REGION", "see AWS_REGION"},
	{"AWS_CONFIG_FILE", "AWS config file (default ~/.aws/config); its presence tells kiln list that AWS is set up"},
	{"AWS_SHARED_CREDENTIALS_FILE", "AWS credentials file (default ~/.aws/credentials); likewise"},
	{"AWS_WEB_IDENTITY_TOKEN_FILE", "web-identity credentials (with AWS_ROLE_ARN), read by the AWS SDK; tells kiln list that AWS is set up"},
	{"AWS_ROLE_ARN", "see AWS_WEB_IDENTITY_TOKEN_FILE"},
	{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "container credentials endpoint (AWS SDK); tells kiln list that AWS is set up"},
	{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "see AWS_CONTAINER_CREDENTIALS_FULL_URI"},
	{"AWS_ENDPOINT_URL", "send every AWS request to this endpoint instead of AWS's (AWS SDK; an emulator, a proxy)"},
	{"AWS_EC2_METADATA_DISABLED", "true: the AWS SDK does not ask the instance metadata service for credentials"},
	{"NO_COLOR", "any value: the wizard uses no colour"},
	{"TERM", "dumb: the wizard uses no colour or styling"},
	{"COLORTERM", "the terminal's colour depth, for the wizard's colours"},
}

func environmentPage() string {
	page := `kiln reads these environment variables (flags win over them). The AWS SDK
and client-go read more of their own standard variables; the main ones are
listed. kubeconfig exec credential plugins run with kiln's whole environment.

`
	width := 0
	for _, v := range environmentVars {
		width = max(width, len(v.name))
	}
	for _, v := range environmentVars {
		page += "  " + v.name + spaces(width-len(v.name)+2) + v.meaning + "\n"
	}
	page += `
kiln sets, but never reads, KILN_AUTH_KEYS and KILN_CLUSTER in the gateway
pods and KILN_PROJECT_TOKEN's file reference in project pods.

kiln makes no network calls other than to the Kubernetes API servers
(kubeconfig contexts) and AWS endpoints it is pointed at, and the
credential plugins those name: no telemetry, no update checks.`
	return page
}

func spaces(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = ' '
	}
	return string(b)
}

// newEnvironmentTopic is `kiln help environment`: a help topic, not a
// command.
func newEnvironmentTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "environment",
		Short: "Environment variables kiln reads",
		Long:  environmentPage(),
	}
}
