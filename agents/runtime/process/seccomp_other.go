//go:build !amd64 && !arm64

package process

// seccompArch is 0 where the runtime has no default profile: RuntimeDefault is refused.
const seccompArch = 0

var archSeccompRules []seccompRule
