// Command testenv runs a command against a throwaway PostgreSQL server: it starts one from the machine's
// PostgreSQL binaries in a temporary directory on a free loopback port, runs the command with
// WHEELHOUSE_TEST_DATABASE_URL pointing at it, then stops and removes it. `make test` uses it when
// WHEELHOUSE_TEST_DATABASE_URL is not set.
//
//	go run ./cmd/testenv -- go test ./...
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/wheelhouse-dev/wheelhouse/store/pgserver"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testenv -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	code, err := run(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "wheelhouse-test-pg-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := pgserver.Start(ctx, pgserver.Config{
		DataDir: dir, TCP: true, Database: "postgres", Settings: pgtest.TestSettings, Logger: log,
	})
	if err != nil {
		return 1, err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "testenv: throwaway PostgreSQL on 127.0.0.1:%d (%s)\n", srv.Port(), dir)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), pgtest.EnvURL+"="+srv.TCPURL("postgres"))
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
