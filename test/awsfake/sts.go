package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// stsProto renders STS query-API errors: <ErrorResponse><Error>...
type stsProto struct{}

func stsError(status int, code, msg string) response {
	return xmlError(status, `<ErrorResponse xmlns="`+stsNamespace+`"><Error><Type>Sender</Type>`, code, msg,
		"</Error><RequestId>"+requestID()+"</RequestId></ErrorResponse>")
}

func (stsProto) throttle() response {
	return stsError(http.StatusBadRequest, "Throttling", "Rate exceeded")
}

func (stsProto) serverError() response {
	return stsError(http.StatusInternalServerError, "InternalFailure", "An internal error occurred")
}

func (stsProto) denied(account, op, resource string) response {
	return stsError(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: arn:aws:iam::%s:user/ci is not authorized to perform: sts:%s on resource: %s", account, op, resource))
}

func (stsProto) malformed() response {
	return response{status: http.StatusOK, contentType: xmlType, body: `<AssumeRoleResponse xmlns="` + stsNamespace + `"><AssumeRoleResult><Credentials><AccessKeyId>ASIA`}
}

// AssumeRoleCall records the inputs of one AssumeRole request.
type AssumeRoleCall struct {
	RoleARN, SessionName, ExternalID string
}

// AssumeRoleCalls returns the AssumeRole requests answered so far.
func (s *Server) AssumeRoleCalls() []AssumeRoleCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AssumeRoleCall(nil), s.assumed...)
}

type xmlAssumeRole struct {
	XMLName     xml.Name `xml:"AssumeRoleResponse"`
	Xmlns       string   `xml:"xmlns,attr"`
	Credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	} `xml:"AssumeRoleResult>Credentials"`
	AssumedRoleUser struct {
		Arn           string `xml:"Arn"`
		AssumedRoleID string `xml:"AssumedRoleId"`
	} `xml:"AssumeRoleResult>AssumedRoleUser"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// AssumedAccessKeyID is the access key the fake hands out from AssumeRole,
// so tests can see that later calls were signed with assumed credentials.
const AssumedAccessKeyID = "ASIAFAKEASSUMEDROLE1"

func (s *Server) assumeRole(form url.Values) response {
	arn, session := form.Get("RoleArn"), form.Get("RoleSessionName")
	if !strings.HasPrefix(arn, "arn:") || session == "" {
		return stsError(http.StatusBadRequest, "ValidationError", "RoleArn and RoleSessionName are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assumed = append(s.assumed, AssumeRoleCall{RoleARN: arn, SessionName: session, ExternalID: form.Get("ExternalId")})
	role := arn[strings.LastIndex(arn, "/")+1:]
	doc := xmlAssumeRole{Xmlns: stsNamespace, RequestID: requestID()}
	doc.Credentials.AccessKeyID = AssumedAccessKeyID
	doc.Credentials.SecretAccessKey = "fakeAssumedSecretKey0000000000000000000"
	doc.Credentials.SessionToken = "FakeSessionToken/" + session + "/" + form.Get("ExternalId")
	// Real clock, not s.now: the SDK's credential cache compares the
	// expiry with the wall clock, and a fixed test clock would expire them.
	doc.Credentials.Expiration = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	doc.AssumedRoleUser.Arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", s.account, role, session)
	doc.AssumedRoleUser.AssumedRoleID = "AROAFAKEROLEID:" + session
	b, err := xml.Marshal(doc)
	if err != nil {
		return stsError(http.StatusInternalServerError, "InternalFailure", err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: string(b)}
}

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
