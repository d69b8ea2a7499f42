package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Identity names one process for its whole life: a PID alone may be
// reused after the process exits, the pair (PID, start time) is not.
type Identity struct {
	PID int `json:"pid"`
	// Start is field 22 of /proc/<pid>/stat, clock ticks since boot.
	Start uint64 `json:"start"`
}

// ReadProcStat returns the state letter and start time of pid.
func ReadProcStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// comm (field 2) may hold spaces and parentheses: fields restart after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+2:])
	// fields[0] is field 3 (state); starttime is field 22 -> fields[19].
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	return fields[0][0], start, err
}

// Identify returns the identity of the live process pid.
func Identify(pid int) (Identity, error) {
	_, start, err := ReadProcStat(pid)
	return Identity{PID: pid, Start: start}, err
}

// alive reports whether the process p still runs (a zombie has exited).
func (p Identity) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	state, start, err := ReadProcStat(p.PID)
	return err == nil && start == p.Start && state != 'Z' && state != 'X'
}

// signal sends sig to p's process group and to p itself, if p is still the
// process it was.
func (p Identity) Signal(sig unix.Signal) error {
	fd, err := p.PidFD()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_ = unix.Kill(-p.PID, sig) // the container's process group; absent if it changed it
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", p.PID, err)
	}
	return nil
}

// ErrGone is returned for a process that has already exited.
var ErrGone = errors.New("process is gone")

// pidfd opens a pidfd on p, verified to be p and not a reused PID.
func (p Identity) PidFD() (int, error) {
	if p.PID <= 0 {
		return -1, ErrGone
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return -1, ErrGone
	}
	// The pidfd pins the PID: if the start time matches now, fd is p.
	if _, start, err := ReadProcStat(p.PID); err != nil || start != p.Start {
		unix.Close(fd)
		return -1, ErrGone
	}
	return fd, nil
}

// wait blocks until p has exited (is a zombie or gone), ctx is done, or
// timeout passes; it reports whether p exited.
func (p Identity) Wait(ctx context.Context, timeout time.Duration) bool {
	fd, err := p.PidFD()
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	for {
		// Poll in slices so ctx is honoured; a pidfd is readable once the
		// process has exited.
		ms := min(time.Until(deadline), 100*time.Millisecond).Milliseconds()
		if ms < 0 {
			ms = 0
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(ms))
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return !p.Alive()
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return !p.Alive()
		}
	}
}
