package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "jqctl",
		Short:         "jetqueue's command line: talk to a jetqueue server, or simulate scenarios locally",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newSimulate(stdout, stderr))
	root.AddCommand(newScore(stdout, stderr))
	root.AddCommand(newNodes(stdout))
	addClientCommands(root, stdout)
	root.AddCommand(newLoadtest(stdout))
	root.AddCommand(newDev(stdout, stderr))
	root.AddCommand(whatifCmd(stdout))
	return root
}

// run executes jqctl with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "jqctl:", err)
		return 2
	}
}
