// Package errno holds the kernel's error codes as the modelled paths
// return them (include/uapi/asm-generic/errno-base.h, errno.h), one type
// for every subsystem so an error crosses package boundaries unchanged.
package errno

import "fmt"

// Errno is a kernel error code (negated in C).
type Errno int

// The codes the registration paths return (include/uapi/asm-generic/errno*.h).
const (
	EPERM         Errno = 1
	ENOENT        Errno = 2
	ESRCH         Errno = 3
	E2BIG         Errno = 7
	ENOMEM        Errno = 12
	EACCES        Errno = 13
	EFAULT        Errno = 14
	EBUSY         Errno = 16
	EEXIST        Errno = 17
	ENODEV        Errno = 19
	EINVAL        Errno = 22
	ENOSPC        Errno = 28
	ERANGE        Errno = 34
	EILSEQ        Errno = 84
	EOPNOTSUPP    Errno = 95
	EADDRNOTAVAIL Errno = 99
	ECANCELED     Errno = 125
)

var errnoNames = map[Errno]string{
	EPERM: "EPERM", ENOENT: "ENOENT", ESRCH: "ESRCH", E2BIG: "E2BIG", ENOMEM: "ENOMEM",
	EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY", EEXIST: "EEXIST", ENODEV: "ENODEV",
	EINVAL: "EINVAL", ENOSPC: "ENOSPC", ERANGE: "ERANGE", EILSEQ: "EILSEQ", EOPNOTSUPP: "EOPNOTSUPP",
	EADDRNOTAVAIL: "EADDRNOTAVAIL", ECANCELED: "ECANCELED",
}

// Lookup returns the code with the symbolic name name ("EINVAL").
func Lookup(name string) (Errno, bool) {
	for e, n := range errnoNames {
		if n == name {
			return e, true
		}
	}
	return 0, false
}

// Name returns the symbolic name ("EINVAL"), or "E<n>".
func (e Errno) Name() string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return fmt.Sprintf("E%d", int(e))
}

func (e Errno) Error() string { return "-" + e.Name() }
