//go:build !unix

package safefile

import "io/fs"

// oNonblock: no FIFOs to wait for here.
const oNonblock = 0

// links: the platform reports no link count.
func links(fs.FileInfo) (uint64, bool) { return 0, false }
