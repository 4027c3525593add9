package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/test/testenv"
)

// fmt_ renders a value and an error for eventually's "last seen" detail.
func fmt_(v any, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", v)
}

func httpGet(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// tryGet is httpGet without failing the test (for polling).
func tryGet(ctx context.Context, url string) (string, error) { return testenv.Get(ctx, url) }
