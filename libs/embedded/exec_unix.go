package embedded

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// postgresUser is who runs the server when we are root: initdb and
// postgres refuse to run as root.
func postgresUser() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, false
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, true
}

// ownForServer hands the cluster directory to the server's user.
func ownForServer(dir string) error {
	if uid, gid, ok := postgresUser(); ok {
		return os.Chown(dir, uid, gid)
	}
	return nil
}

// runAs runs a PostgreSQL binary as the server's user.
func runAs(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if uid, gid, ok := postgresUser(); ok {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	return cmd.CombinedOutput()
}
