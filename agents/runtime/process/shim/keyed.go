package shim

import (
	"os"
	"strconv"
	"strings"
)

// ReadKeyed reads the value of key in a "key value" per line file (0 if absent): cgroup files such as
// memory.events and memory.stat.
func ReadKeyed(path, key string) int {
	v, _ := ReadKeyedOK(path, key)
	return int(v)
}

// ReadKeyedOK reads the value of key in a "key value" per line file.
func ReadKeyedOK(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
