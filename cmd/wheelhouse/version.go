package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wheelhouse-dev/wheelhouse/version"
)

func newVersionCommand(out io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, git commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printVersion(out, version.Get(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: empty for text, or json")
	return cmd
}

func printVersion(out io.Writer, v version.Info, format string) error {
	switch format {
	case "":
		_, err := fmt.Fprintf(out, "Version:    %s\nGit commit: %s\nGo version: %s\nPlatform:   %s\n",
			v.GitVersion, v.GitCommit, v.GoVersion, v.Platform)
		return err
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return fmt.Errorf("unknown output format %q: want json or nothing", format)
}
