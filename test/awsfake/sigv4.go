package awsfake

import (
	"errors"
	"fmt"
	"strings"
)

// CredentialScope is the part of a SigV4 Authorization header that says who
// signed the request and for which region and service.
type CredentialScope struct {
	AccessKeyID string
	Date        string
	Region      string
	Service     string
}

// ParseCredentialScope extracts the credential scope from a SigV4
// Authorization header such as
//
//	AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/ssm/aws4_request, SignedHeaders=..., Signature=...
//
// The fake routes by the signed region, exactly as AWS does: an SDK client
// configured for eu-west-1 signs for eu-west-1 even when its endpoint is local.
func ParseCredentialScope(header string) (CredentialScope, error) {
	const algo = "AWS4-HMAC-SHA256"
	rest, ok := strings.CutPrefix(strings.TrimSpace(header), algo)
	if !ok {
		return CredentialScope{}, errors.New("authorization: not an AWS4-HMAC-SHA256 signature")
	}
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		v, ok := strings.CutPrefix(part, "Credential=")
		if !ok {
			continue
		}
		f := strings.Split(v, "/")
		if len(f) != 5 || f[4] != "aws4_request" {
			return CredentialScope{}, fmt.Errorf("authorization: credential %q is not AKID/date/region/service/aws4_request", v)
		}
		for i, name := range []string{"access key", "date", "region", "service"} {
			if f[i] == "" {
				return CredentialScope{}, fmt.Errorf("authorization: empty %s in credential scope", name)
			}
		}
		return CredentialScope{AccessKeyID: f[0], Date: f[1], Region: f[2], Service: f[3]}, nil
	}
	return CredentialScope{}, errors.New("authorization: no Credential= element")
}
