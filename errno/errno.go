// Package errno holds the kernel's error codes as the modelled paths
// return them (include/uapi/asm-generic/errno-base.h, errno.h), one type
// for every subsystem so an error crosses package boundaries unchanged.
package errno

import "fmt"

// Errno is a kernel error code (negated in C).
type Errno int

// The codes the registration paths return (include/uapi/asm-generic/errno*.h).
const (
	ENOENT     Errno = 2
	ENOMEM     Errno = 12
	EBUSY      Errno = 16
	EEXIST     Errno = 17
	EINVAL     Errno = 22
	ENOSPC     Errno = 28
	ERANGE     Errno = 34
	EILSEQ     Errno = 84
	EOPNOTSUPP Errno = 95
)

var errnoNames = map[Errno]string{
	ENOENT: "ENOENT", ENOMEM: "ENOMEM", EBUSY: "EBUSY", EEXIST: "EEXIST", EINVAL: "EINVAL",
	ENOSPC: "ENOSPC", ERANGE: "ERANGE", EILSEQ: "EILSEQ", EOPNOTSUPP: "EOPNOTSUPP",
}

// Name returns the symbolic name ("EINVAL"), or "E<n>".
func (e Errno) Name() string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return fmt.Sprintf("E%d", int(e))
}

func (e Errno) Error() string { return "-" + e.Name() }
