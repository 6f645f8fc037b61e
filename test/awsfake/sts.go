package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// FakeUserName is the IAM user the fake says signed a call with static keys.
const FakeUserName = "packer-ci"

type xmlGetCallerIdentity struct {
	XMLName xml.Name `xml:"GetCallerIdentityResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Arn     string   `xml:"GetCallerIdentityResult>Arn"`
	UserID  string   `xml:"GetCallerIdentityResult>UserId"`
	Account string   `xml:"GetCallerIdentityResult>Account"`
	Request string   `xml:"ResponseMetadata>RequestId"`
}

// getCallerIdentity answers as STS does: credentials from AssumeRole are an
// assumed role, anything else the fake's IAM user.
func (s *Server) getCallerIdentity(region, accessKeyID string) response {
	s.mu.Lock()
	account := s.account
	var role AssumeRoleCall
	if n := len(s.assumed); n > 0 {
		role = s.assumed[n-1]
	}
	s.mu.Unlock()
	doc := xmlGetCallerIdentity{Xmlns: stsNamespace, Account: account, Request: requestID()}
	if accessKeyID == AssumedAccessKeyID && role.RoleARN != "" {
		name := role.RoleARN[lastSlash(role.RoleARN)+1:]
		doc.Arn = fmt.Sprintf("arn:%s:sts::%s:assumed-role/%s/%s", partition(region), account, name, role.SessionName)
		doc.UserID = "AROAFAKEROLEID:" + role.SessionName
	} else {
		doc.Arn = fmt.Sprintf("arn:%s:iam::%s:user/%s", partition(region), account, FakeUserName)
		doc.UserID = "AIDAFAKEUSERID0000001"
	}
	b, err := xml.Marshal(doc)
	if err != nil {
		return stsError(http.StatusInternalServerError, "InternalFailure", err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: string(b)}
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
