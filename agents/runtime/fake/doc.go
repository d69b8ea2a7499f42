// Package fake is an in-memory runtime.Runtime for hollow nodes and kubelet
// tests. It starts nothing: a started container is RUNNING at once and stays
// so until it is stopped, or until the test calls Exit. ExecSync succeeds
// with empty output unless an exec hook says otherwise. Exec, Attach and
// PortForward return URLs on the reserved host fake.invalid that no server
// answers. Filters, labels, states and errors follow the runtime package's
// contract exactly (the runtimetest conformance suite runs against it), so
// code tested with the fake behaves the same on the process runtime.
//
// A Runtime is safe for concurrent use; all its state is guarded by one mutex.
package fake
