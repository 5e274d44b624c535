package managerutil_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/masquerade"
)

func TestPlacementText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]managerutil.Placement{"Insert": managerutil.Insert, "Append": managerutil.Append, "None": managerutil.None})
	require.Equal(t, "managerutil.Placement(3)", managerutil.Placement(3).String())
	require.Equal(t, "masquerade.Jump(7)", managerutil.PlacementString(masquerade.Jump(7)))
}
