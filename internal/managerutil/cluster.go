package managerutil

import (
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/errs"
)

// Refused returns the error a manager reports for a cluster message whose
// Validate failed with err: its text is sentinel's, ": " and err's text
// without cluster's "cluster: invalid " (`masquerade: invalid pool: pool
// "pods": …`), and errors.Is matches sentinel, cluster.ErrInvalid and every
// other sentinel err matches.
func Refused(sentinel, err error) error {
	detail := strings.TrimPrefix(err.Error(), cluster.ErrInvalid.Error()+" ")
	return errs.Also(fmt.Errorf("%w: %s", sentinel, detail), err)
}
