package kprobes

import "github.com/kpsim/kpsim/errno"

// Errno is the kernel error code register_kprobe returns (package errno).
type Errno = errno.Errno

// The codes the registration paths return.
const (
	ENOENT     = errno.ENOENT
	ENOMEM     = errno.ENOMEM
	EBUSY      = errno.EBUSY
	EEXIST     = errno.EEXIST
	EINVAL     = errno.EINVAL
	ENOSPC     = errno.ENOSPC
	ERANGE     = errno.ERANGE
	EILSEQ     = errno.EILSEQ
	EOPNOTSUPP = errno.EOPNOTSUPP
	E2BIG      = errno.E2BIG
)
