// Package awstest holds what the tests of the packages that reach AWS through awsaccess share.
package awstest

import (
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// IsolateEnv keeps the developer's AWS settings (profiles, keys, regions, endpoints, retry
// settings, the instance metadata service) out of the test.
func IsolateEnv(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_SSM": "", "AWS_ENDPOINT_URL_EC2": "", "AWS_ENDPOINT_URL_STS": "",
		"AWS_ENDPOINT_URL_PRICING":  "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": "",
		// A CA bundle would make the SDK reject the recording HTTP clients.
		"AWS_CA_BUNDLE": "",
	} {
		t.Setenv(k, v)
	}
}

// Fake starts a fake AWS endpoint seeded with the DLAMIs of regions, for the test's lifetime,
// with the environment isolated (IsolateEnv); now, when set, is its clock.
func Fake(t testing.TB, now time.Time, regions ...string) (*awsfake.Server, string) {
	t.Helper()
	IsolateEnv(t)
	fake := awsfake.NewSeeded(regions...)
	if !now.IsZero() {
		fake.SetNow(func() time.Time { return now })
	}
	srv := fake.Start()
	t.Cleanup(srv.Close)
	return fake, srv.URL
}
