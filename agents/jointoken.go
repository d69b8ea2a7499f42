package agents

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
)

// The join token is needed once: to exchange it for the node's credential (agents/join), which the agent keeps
// in its data dir. Given in a file (Config.TokenFile, which install.sh writes), it is read only while the node
// has not joined and the file is deleted once the credential is kept, so only the credential stays on the
// machine.

// joinToken is the join token to join with: Config.Token, else Config.TokenFile's content ("" when the file is
// gone: the node joined before, or was given no token).
func (c Config) joinToken() (string, error) {
	if c.Token != "" || c.TokenFile == "" {
		return c.Token, nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent: the join token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// forgetJoinToken deletes Config.TokenFile, once the node's credential is kept. A failure is logged: the agent
// runs on with its credential.
func (c Config) forgetJoinToken(log *slog.Logger) {
	if c.TokenFile == "" {
		return
	}
	switch err := os.Remove(c.TokenFile); {
	case err == nil:
		log.Info("deleted the join token file: the node keeps only its credential", "file", c.TokenFile)
	case !errors.Is(err, fs.ErrNotExist):
		log.Warn("deleting the join token file failed; delete it by hand", "file", c.TokenFile, "err", err)
	}
}
