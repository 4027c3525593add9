package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScaleFromZeroCommand(t *testing.T) {
	out, err := run(t, "", "scale-from-zero", "--help")
	require.NoError(t, err)
	for _, flag := range []string{"--epp-selector", "--epp-url", "--poll-interval", "--budget-configmap", "--activator-listen", "--leader-elect"} {
		assert.Contains(t, out, flag)
	}

	// Flags are validated before any cluster access.
	_, err = run(t, "", "scale-from-zero", "--epp-url=tcp://x", "--poll-interval=0s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--epp-url="tcp://x"`)
	assert.Contains(t, err.Error(), "--poll-interval=0s: must be positive")
}
