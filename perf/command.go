package perf

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Command is one harness's command line: `<name> [flags]` runs it, `<name> report --from F --out M` renders
// its part of the markdown file M again from the results a run wrote with --json (e.g. after a change to the
// report's layout).
type Command struct {
	Name string
	// Run parses the flags and runs the harness; a usage error is wrapped in ErrUsage.
	Run func(ctx context.Context, args []string) error
	// Report renders the results file from into the markdown file out.
	Report func(from, out string) error
	// DefaultResults is --from's default.
	DefaultResults string
}

// ErrUsage marks an error in the command line (exit status 2).
var ErrUsage = errors.New("usage")

// Main runs the command with the process's arguments until SIGINT or SIGTERM and exits with its status.
func (c Command) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	name, err := c.Name, error(nil)
	if len(os.Args) > 1 && os.Args[1] == "report" {
		name += " report"
		err = c.report(os.Args[2:])
	} else {
		err = c.Run(ctx, os.Args[1:])
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		if errors.Is(err, ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func (c Command) report(args []string) error {
	fs := flag.NewFlagSet(c.Name+" report", flag.ContinueOnError)
	from := fs.String("from", c.DefaultResults, "results written by a run's --json")
	out := fs.String("out", "", "markdown file whose "+c.Name+" part is rewritten")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if *out == "" {
		return fmt.Errorf("%w: --out is required", ErrUsage)
	}
	return c.Report(*from, *out)
}

// ReadResults reads a run's --json results into R.
func ReadResults[R any](path string) (*R, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res R
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &res, nil
}
