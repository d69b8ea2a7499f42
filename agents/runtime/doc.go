// Package runtime declares the container runtime the node agent's kubelet
// drives: the subset of CRI's RuntimeService (and a sliver of its
// ImageService) that a kubelet needs, with the request and response types of
// k8s.io/cri-api/pkg/apis/runtime/v1 and the method signatures of
// k8s.io/cri-api/pkg/apis.RuntimeService, so a containerd adapter over
// k8s.io/cri-client satisfies it without glue.
//
// Implementations: process (host processes in a network namespace and
// cgroups), cri (any CRI runtime over its socket: containerd) and fake (in
// memory, instant, for hollow nodes and kubelet tests). runtimetest holds the
// conformance suite all pass (cri against a real containerd).
//
// # Guarantees every implementation gives
//
//   - IDs are opaque, unique strings. Sandboxes and containers are found again
//     by their labels (io.kubernetes.pod.uid, io.kubernetes.container.name,
//     ...), which are stored verbatim and returned by List and Status: this is
//     how a restarted kubelet re-adopts what it started. A runtime opened on
//     the same state sees the same objects in the same states.
//   - Errors are gRPC statuses, as a CRI runtime's are: an unknown ID is
//     codes.NotFound (test with IsNotFound), a call that does not fit the
//     object's state (start a container twice, create one in a sandbox that is
//     not ready) is codes.FailedPrecondition, a bad request codes.InvalidArgument.
//     Anything else is codes.Unknown or codes.Internal.
//   - Stop and Remove are idempotent: stopping a stopped container or removing
//     a removed one succeeds (as CRI requires), and Remove and Stop of an
//     ID that never existed also succeed (containerd answers NotFound there;
//     the cri adapter maps it, and its state errors to FailedPrecondition).
//   - ExecSync returns k8s.io/utils/exec.CodeExitError for a non-zero exit (as
//     k8s.io/cri-client does) and an error wrapping ErrCommandTimedOut when the
//     timeout passes (cri-client's own ErrCommandTimedOut is mapped to it by
//     the containerd adapter), so probe code handles every runtime alike.
//   - Filters: Id is an exact match, State matches the state, LabelSelector
//     matches when every key is present with the same value, PodSandboxId
//     (containers) the owning sandbox. A nil filter lists everything.
//   - Exec, Attach and PortForward return the URL of the runtime's streaming
//     server for one use (the request is cached behind a random token), as CRI.
//
// Implementations are safe for concurrent use.
package runtime
