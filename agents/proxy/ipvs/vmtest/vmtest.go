// Package vmtest runs a Go package's tests inside Debian's kernel booted under qemu, for kernel features this
// machine's kernel lacks (IPVS): it builds the package's test binary (static, linux/amd64), packs it with a static
// busybox and the kernel modules asked for into a newc initramfs whose /init loads the modules in dependency order,
// runs the binary with GuestEnv set and powers off, boots qemu-system-x86_64 (software emulation unless asked for
// KVM) and streams the serial console. scripts/ensure-vm.sh installs qemu and busybox-static and
// unpacks the kernel into .cache/vm; `make test` runs it first.
package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// GuestEnv is set to "1" in the environment of the test binary inside the guest.
const GuestEnv = "WHEELHOUSE_VM_GUEST"

// InGuest reports whether this process runs inside the guest.
func InGuest() bool { return os.Getenv(GuestEnv) == "1" }

// doneMarker starts the line /init prints with the test binary's exit code.
const doneMarker = "WHEELHOUSE-VM-DONE exit="

// ErrAssets is returned (wrapped) when qemu, busybox or the kernel is missing.
var ErrAssets = errors.New("vmtest: the VM is not set up: run scripts/ensure-vm.sh (make test does)")

// Options says what to run in the guest.
type Options struct {
	// Package is the directory of the Go package whose test binary runs in the guest.
	Package string
	// Args are the test binary's arguments (-test.run, -test.bench, …); -test.v is always given.
	Args []string
	// Modules are the kernel modules to load before the tests, by name; their dependencies are loaded first.
	Modules []string
	// Timeout bounds the whole run: build, boot and tests (default 3 minutes).
	Timeout time.Duration
	// Memory is the guest's RAM in MiB (default 1024).
	Memory int
	// Log receives each line the guest writes to its console (default: discarded).
	Log func(string)
	// Accel is qemu's accelerator: "tcg" (software emulation, the default) or "kvm". KVM is not chosen by itself:
	// where /dev/kvm exists but nested virtualisation does not work, the guest hangs.
	Accel string
}

// Assets are the files a run needs.
type Assets struct {
	// Version is the kernel's (e.g. 6.1.0-57-amd64); Kernel its ELF vmlinux; Modules the tree of its modules.
	Version, Kernel, Modules string
	// Qemu is qemu-system-x86_64; Busybox a static busybox.
	Qemu, Busybox string
}

// FindAssets finds the VM's files: the kernel under .cache/vm of the repository holding dir (found by walking up to
// go.mod), qemu-system-x86_64 on PATH, /bin/busybox. Anything missing is an error wrapping ErrAssets.
func FindAssets(dir string) (Assets, error) {
	root, err := repoRoot(dir)
	if err != nil {
		return Assets{}, err
	}
	cache := filepath.Join(root, ".cache", "vm")
	v, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		return Assets{}, fmt.Errorf("%w: no kernel unpacked (%v)", ErrAssets, err)
	}
	a := Assets{Version: strings.TrimSpace(string(v))}
	a.Kernel = filepath.Join(cache, a.Version, "vmlinux")
	a.Modules = filepath.Join(cache, a.Version, "root", "lib", "modules", a.Version, "kernel")
	for _, p := range []string{a.Kernel, a.Modules} {
		if _, err := os.Stat(p); err != nil {
			return Assets{}, fmt.Errorf("%w: %v", ErrAssets, err)
		}
	}
	if a.Qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		return Assets{}, fmt.Errorf("%w: %v", ErrAssets, err)
	}
	a.Busybox = "/bin/busybox"
	if !isStatic(a.Busybox) {
		return Assets{}, fmt.Errorf("%w: %s is missing or not statically linked (busybox-static)", ErrAssets, a.Busybox)
	}
	return a, nil
}

// repoRoot is the nearest directory holding go.mod, from dir up.
func repoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("vmtest: no go.mod above %s", dir)
		}
	}
}

// Run runs the tests of o.Package in the guest. It fails when the assets are missing, the build fails, the guest's
// test binary exits non-zero, or the guest does not report its end before the timeout.
func Run(ctx context.Context, o Options) error {
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Memory == 0 {
		o.Memory = 1024
	}
	if o.Log == nil {
		o.Log = func(string) {}
	}
	a, err := FindAssets(o.Package)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "vmtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "guest.test")
	if err := build(ctx, o.Package, bin); err != nil {
		return err
	}
	initrd := filepath.Join(tmp, "initramfs.cpio")
	if err := writeInitramfs(initrd, a, bin, o); err != nil {
		return fmt.Errorf("vmtest: initramfs: %w", err)
	}
	return boot(ctx, a, initrd, o)
}

// build compiles the test binary of the package in dir: static, for linux/amd64.
func build(ctx context.Context, dir, out string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("vmtest: the go command: %w", err)
	}
	cmd := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: build the test binary of %s: %w\n%s", dir, err, b)
	}
	return nil
}

// writeInitramfs packs busybox, the modules, the test binary and /init into a newc cpio at path.
func writeInitramfs(path string, a Assets, bin string, o Options) error {
	mods, err := findModules(a.Modules)
	if err != nil {
		return err
	}
	order, data, err := mods.order(o.Modules)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := newCPIO(f)
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "tmp", "run", "modules"} {
		c.dir(d)
	}
	c.charDev("dev/console", 5, 1)
	c.charDev("dev/null", 1, 3)
	c.copyFile("bin/busybox", 0o755, a.Busybox)
	for _, applet := range busyboxApplets {
		c.symlink("bin/"+applet, "busybox")
	}
	for i, name := range order {
		c.file(fmt.Sprintf("modules/%02d-%s.ko", i, name), 0o644, data[name])
	}
	c.copyFile("guest.test", 0o755, bin)
	c.file("init", 0o755, initScript(o))
	if err := c.close(); err != nil {
		return err
	}
	return f.Close()
}

// initScript mounts the pseudo file systems, loads the modules, runs the tests, prints the marker and powers off.
func initScript(o Options) []byte {
	args := []string{"-test.v"}
	args = append(args, o.Args...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	var s bytes.Buffer
	s.WriteString(`#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
for m in /modules/*.ko; do insmod "$m" || echo "vmtest: insmod $m failed"; done
ip link set lo up
cd /tmp
`)
	fmt.Fprintf(&s, "HOME=/tmp TMPDIR=/tmp %s=1 /guest.test %s\n", GuestEnv, strings.Join(quoted, " "))
	fmt.Fprintf(&s, "echo \"%s$?\"\npoweroff -f\n", doneMarker)
	return s.Bytes()
}

// boot runs qemu until the guest powers off, streaming its console to o.Log, and returns the tests' verdict.
func boot(ctx context.Context, a Assets, initrd string, o Options) error {
	args := []string{
		"-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-m", strconv.Itoa(o.Memory), "-smp", "2",
		"-kernel", a.Kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=4 mitigations=off rdinit=/init",
	}
	if o.Accel == "kvm" {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		args = append(args, "-accel", "tcg")
	}
	cmd := exec.CommandContext(ctx, a.Qemu, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("vmtest: start qemu: %w", err)
	}
	code := -1
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		o.Log(line)
		if rest, ok := strings.CutPrefix(line, doneMarker); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				code = n
			}
		}
	}
	waitErr := cmd.Wait()
	elapsed := time.Since(start).Round(time.Millisecond)
	switch {
	case code == 0:
		return nil
	case code > 0:
		return fmt.Errorf("vmtest: the tests failed in the guest (exit status %d, %v)", code, elapsed)
	case ctx.Err() != nil:
		return fmt.Errorf("vmtest: the guest did not finish within %v: %w", o.Timeout, ctx.Err())
	}
	return fmt.Errorf("vmtest: the guest stopped after %v without reporting its end (qemu: %v) %s", elapsed, waitErr,
		strings.TrimSpace(stderr.String()))
}
