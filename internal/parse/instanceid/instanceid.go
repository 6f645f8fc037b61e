// Package instanceid parses an EC2 instance id as a host tells it: cloud-init's record of
// the instance it runs on (/var/lib/cloud/data/instance-id) or IMDS's meta-data/instance-id.
//
// EC2's ids are "i-" and 8 (older) or 17 lowercase hex digits (docs.aws.amazon.com,
// "Resource IDs": "i-1234567890abcdef0").
package instanceid

import (
	"fmt"
	"regexp"
	"strings"
)

var instanceID = regexp.MustCompile(`^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)

// Parse returns the instance id the text holds, alone on its line.
func Parse(text string) (string, error) {
	id := strings.TrimSpace(text)
	if !instanceID.MatchString(id) {
		if len(id) > 80 {
			id = id[:80] + "…"
		}
		return "", fmt.Errorf("not an EC2 instance id (i- and 8 or 17 hex digits): %q", id)
	}
	return id, nil
}
