package testkit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// The environment that makes a test binary a child: the role's name and
// its argument.
const (
	roleEnv = "QUOTACTL_TESTKIT_CHILD"
	argEnv  = "QUOTACTL_TESTKIT_CHILD_ARG"
)

// RunChild makes this test binary a child process when Child started it:
// it runs the role Child named, with Child's argument, and exits with the
// code the role returns, before any test runs. An unknown role exits 2.
// In a binary Child did not start it returns at once. Call it first in
// TestMain:
//
//	func TestMain(m *testing.M) {
//		testkit.RunChild(map[string]func(arg string) int{"worker": worker})
//		os.Exit(m.Run())
//	}
//
// A role is the child's main: it reads what it needs from arg (plain
// text, or JSON for a config), stdin and the environment, reports on
// stdout and stderr, and returns the exit code.
func RunChild(roles map[string]func(arg string) int) {
	role, ok := os.LookupEnv(roleEnv)
	if !ok {
		return
	}
	main := roles[role]
	if main == nil {
		fmt.Fprintf(os.Stderr, "testkit: this test binary has no child role %q\n", role)
		os.Exit(2)
	}
	os.Exit(main(os.Getenv(argEnv)))
}

// Child returns a command, not started, that runs this test binary again
// as a child process in role, given arg (see RunChild); it runs no test.
// Its Env is this process's environment and the role: append to it, and
// set Stdin, Stdout, Stderr or SysProcAttr, as for any exec.Cmd. A child
// the test started and did not wait for is killed, and waited for, when
// the test ends.
func Child(t testing.TB, role, arg string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, argEnv+"="+arg)
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// MainRole returns a role that runs a command's main with the flags given
// as its argument, a JSON list: the examples' process tests start real
// example processes that way (testkit.Child(t, "main", `["--store", URL]`)).
func MainRole(main func()) func(flags string) int {
	return func(flags string) int {
		var args []string
		if err := json.Unmarshal([]byte(flags), &args); err != nil {
			fmt.Fprintln(os.Stderr, "main child:", err)
			return 2
		}
		os.Args = append(os.Args[:1], args...)
		main()
		return 0
	}
}
