package containerdtest

// MountPoints exposes mountPoints to the package's external tests.
var MountPoints = mountPoints
