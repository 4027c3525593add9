package daemon

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaseFlagsAndValidate(t *testing.T) {
	l := DefaultLease("wva-x", "ns", true)
	require.NoError(t, l.Validate())
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.AddFlags(fs, "elect")
	require.NoError(t, fs.Parse([]string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=5s", "--leader-election-namespace=other", "--leader-election-identity=replica-a"}))
	assert.Equal(t, 4*time.Second, l.LeaseDuration)
	assert.Equal(t, "other", l.Namespace)
	assert.Equal(t, "replica-a", l.Identity)
	assert.ErrorContains(t, l.Validate(), "lease-duration (4s) > renew-deadline (5s)")
	l.Enabled = false
	assert.NoError(t, l.Validate(), "timings do not matter without election")
}
