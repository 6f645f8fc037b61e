package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
	stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
	xmlType      = "text/xml;charset=UTF-8"
)

// ec2Proto renders EC2 query-API errors: <Response><Errors><Error>...
type ec2Proto struct{}

func ec2Error(status int, code, msg string) response {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Response><Errors><Error><Code>")
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("</Message></Error></Errors><RequestID>" + requestID() + "</RequestID></Response>")
	return response{status: status, contentType: xmlType, body: b.String()}
}

func (ec2Proto) throttle() response {
	return ec2Error(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
}

func (ec2Proto) serverError() response {
	return ec2Error(http.StatusInternalServerError, "InternalError", "An internal error has occurred")
}

func (ec2Proto) denied(account, op, _ string) response {
	return ec2Error(http.StatusForbidden, "UnauthorizedOperation", fmt.Sprintf(
		"You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/packer-ci/bake is not authorized to perform: ec2:%s because no identity-based policy allows the ec2:%s action", account, op, op))
}

func (ec2Proto) malformed() response {
	return response{status: http.StatusOK, contentType: xmlType, body: `<DescribeImagesResponse xmlns="` + ec2Namespace + `"><requestId>1</requestId><imagesSet><item><imageId>ami-0`}
}

// stsProto renders STS query-API errors: <ErrorResponse><Error>...
type stsProto struct{}

func stsError(status int, code, msg string) response {
	var b strings.Builder
	b.WriteString(`<ErrorResponse xmlns="` + stsNamespace + `"><Error><Type>Sender</Type><Code>`)
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("</Message></Error><RequestId>" + requestID() + "</RequestId></ErrorResponse>")
	return response{status: status, contentType: xmlType, body: b.String()}
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

// indexedList collects form values named prefix.1, prefix.2, ... in index order.
func indexedList(form url.Values, prefix string) []string {
	type kv struct {
		i int
		v string
	}
	var items []kv
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 1 {
			continue
		}
		items = append(items, kv{i, vs[0]})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].i < items[b].i })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// ImageFilter is one EC2 Filter.N.Name / Filter.N.Value.M group.
type ImageFilter struct {
	Name   string
	Values []string
}

// DescribeImagesInput is the decoded form of a DescribeImages call.
type DescribeImagesInput struct {
	ImageIDs          []string
	Owners            []string
	Filters           []ImageFilter
	IncludeDeprecated bool
	MaxResults        int
	NextToken         string
}

var knownImageFilters = map[string]bool{
	"name": true, "image-id": true, "owner-id": true, "owner-alias": true, "architecture": true,
	"state": true, "is-public": true, "root-device-type": true, "root-device-name": true,
	"virtualization-type": true, "tag-key": true, "description": true, "image-type": true,
}

// ParseDescribeImages decodes a DescribeImages query body. It never panics
// and rejects what EC2 rejects: unknown filters, bad MaxResults, MaxResults
// together with ImageId.
func ParseDescribeImages(form url.Values) (DescribeImagesInput, error) {
	in := DescribeImagesInput{
		ImageIDs: indexedList(form, "ImageId"),
		Owners:   indexedList(form, "Owner"),
	}
	for i := 1; ; i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			break
		}
		if !knownImageFilters[name] && !strings.HasPrefix(name, "tag:") {
			return in, fmt.Errorf("InvalidParameterValue: The filter '%s' is invalid", name)
		}
		in.Filters = append(in.Filters, ImageFilter{Name: name, Values: indexedList(form, fmt.Sprintf("Filter.%d.Value", i))})
	}
	in.IncludeDeprecated = form.Get("IncludeDeprecated") == "true"
	if v := form.Get("MaxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return in, fmt.Errorf("InvalidParameterValue: Value (%s) for parameter maxResults is invalid. Expecting a value between 1 and 1000", v)
		}
		if len(in.ImageIDs) > 0 {
			return in, fmt.Errorf("InvalidParameterCombination: The parameter imageIdsSet cannot be used with the parameter maxResults")
		}
		in.MaxResults = n
	}
	in.NextToken = form.Get("NextToken")
	return in, nil
}

func (s *Server) queryRequest(body []byte, scope CredentialScope, scopeErr error) (request, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return request{proto: ec2Proto{}}, &wireError{ec2Error(http.StatusBadRequest, "MalformedQueryString", err.Error())}
	}
	action := form.Get("Action")
	switch action {
	case OpAssumeRole, OpGetCallerIdentity:
		req := request{op: action, proto: stsProto{}, resource: "*"}
		if action == OpAssumeRole {
			req.resource = form.Get("RoleArn")
		}
		if scopeErr != nil {
			return req, &wireError{stsError(http.StatusForbidden, "IncompleteSignature", scopeErr.Error())}
		}
		if v := form.Get("Version"); v != "2011-06-15" {
			return req, &wireError{stsError(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q (STS speaks 2011-06-15)", v))}
		}
		if action == OpAssumeRole {
			req.handle = func() response { return s.assumeRole(form) }
		} else {
			req.handle = func() response { return s.getCallerIdentity(scope.Region, scope.AccessKeyID) }
		}
		return req, nil
	}
	if !contains(ec2Ops(), action) {
		return request{op: action, proto: ec2Proto{}}, &wireError{ec2Error(http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %q is not valid for this web service.", action))}
	}
	req := request{op: action, proto: ec2Proto{}, resource: "*"}
	if scopeErr != nil {
		return req, &wireError{ec2Error(http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials: "+scopeErr.Error())}
	}
	if v := form.Get("Version"); v != "2016-11-15" {
		return req, &wireError{ec2Error(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q", v))}
	}
	handle, err := s.ec2Handler(action, scope.Region, form)
	if err != nil {
		code, msg, _ := strings.Cut(err.Error(), ": ")
		return req, &wireError{ec2Error(http.StatusBadRequest, code, msg)}
	}
	if form.Get("DryRun") == "true" {
		return req, &wireError{ec2Error(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")}
	}
	req.handle = handle
	return req, nil
}

func (s *Server) visibleTo(img *Image) bool {
	return img.Public || img.OwnerID == s.account || contains(img.LaunchUsers, s.account)
}

func (s *Server) ownerMatches(img *Image, owners []string) bool {
	if len(owners) == 0 {
		return true
	}
	for _, o := range owners {
		switch o {
		case "self":
			if img.OwnerID == s.account {
				return true
			}
		case "amazon", "aws-marketplace", "aws-backup-vault":
			if img.OwnerAlias == o {
				return true
			}
		default:
			if img.OwnerID == o {
				return true
			}
		}
	}
	return false
}

func (s *Server) deprecated(img *Image) bool {
	if img.DeprecationTime == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339, img.DeprecationTime)
	return err == nil && !t.After(s.now())
}

func filterMatches(img *Image, f ImageFilter) bool {
	var field string
	switch {
	case f.Name == "name":
		field = img.Name
	case f.Name == "image-id":
		field = img.ID
	case f.Name == "owner-id":
		field = img.OwnerID
	case f.Name == "owner-alias":
		field = img.OwnerAlias
	case f.Name == "architecture":
		field = img.Architecture
	case f.Name == "state":
		field = orDefault(img.State, "available")
	case f.Name == "is-public":
		field = strconv.FormatBool(img.Public)
	case f.Name == "root-device-type":
		field = orDefault(img.RootDeviceType, "ebs")
	case f.Name == "root-device-name":
		field = img.RootDeviceName
	case f.Name == "virtualization-type":
		field = orDefault(img.VirtualizationType, "hvm")
	case f.Name == "description":
		field = img.Description
	case f.Name == "image-type":
		field = "machine"
	case f.Name == "tag-key":
		for k := range img.Tags {
			for _, v := range f.Values {
				if matchWildcard(v, k) {
					return true
				}
			}
		}
		return false
	case strings.HasPrefix(f.Name, "tag:"):
		v, ok := img.Tags[strings.TrimPrefix(f.Name, "tag:")]
		if !ok {
			return false
		}
		field = v
	}
	for _, v := range f.Values {
		if matchWildcard(v, field) {
			return true
		}
	}
	return false
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func (s *Server) describeImages(region string, in DescribeImagesInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var picked []*Image
	if len(in.ImageIDs) > 0 {
		for _, id := range in.ImageIDs {
			img := rd.images[id]
			if d, ok := rd.deregistered[id]; img == nil && ok && s.now().Sub(d.at) < DeregisteredVisible && s.visibleTo(&d.img) {
				gone := cloneImage(d.img)
				img = &gone
			}
			if img == nil || !s.visibleTo(img) {
				return ec2Error(http.StatusBadRequest, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", id))
			}
			picked = append(picked, img)
		}
	} else {
		for _, img := range rd.images {
			picked = append(picked, img)
		}
	}
	var out []*Image
	for _, img := range picked {
		s.observeImage(rd, img)
		if !s.visibleTo(img) || !s.ownerMatches(img, in.Owners) {
			continue
		}
		// EC2 hides deprecated images from filter searches unless asked, but
		// not from lookups by id and never from their owner.
		if len(in.ImageIDs) == 0 && !in.IncludeDeprecated && img.OwnerID != s.account && s.deprecated(img) {
			continue
		}
		ok := true
		for _, f := range in.Filters {
			if !filterMatches(img, f) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, img)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	next := ""
	if in.MaxResults > 0 {
		start := 0
		if in.NextToken != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(in.NextToken, "fake-next-"))
			if err != nil || n < 0 || n > len(out) {
				return ec2Error(http.StatusBadRequest, "InvalidParameterValue", "The token is invalid")
			}
			start = n
		}
		end := min(start+in.MaxResults, len(out))
		if end < len(out) {
			next = fmt.Sprintf("fake-next-%d", end)
		}
		out = out[start:end]
	}
	return renderDescribeImages(out, next)
}

// The XML follows the element order of a real DescribeImages capture.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlEBS struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type xmlBDM struct {
	DeviceName string `xml:"deviceName"`
	EBS        xmlEBS `xml:"ebs"`
}

type xmlImage struct {
	ImageID            string          `xml:"imageId"`
	ImageLocation      string          `xml:"imageLocation"`
	ImageState         string          `xml:"imageState"`
	ImageOwnerID       string          `xml:"imageOwnerId"`
	CreationDate       string          `xml:"creationDate"`
	IsPublic           bool            `xml:"isPublic"`
	Architecture       string          `xml:"architecture"`
	ImageType          string          `xml:"imageType"`
	ImageOwnerAlias    string          `xml:"imageOwnerAlias,omitempty"`
	Name               string          `xml:"name"`
	Description        string          `xml:"description,omitempty"`
	RootDeviceType     string          `xml:"rootDeviceType"`
	RootDeviceName     string          `xml:"rootDeviceName,omitempty"`
	BlockDeviceMapping []xmlBDM        `xml:"blockDeviceMapping>item"`
	VirtualizationType string          `xml:"virtualizationType"`
	TagSet             *[]xmlTag       `xml:"tagSet>item,omitempty"`
	Hypervisor         string          `xml:"hypervisor"`
	EnaSupport         bool            `xml:"enaSupport"`
	SriovNetSupport    string          `xml:"sriovNetSupport"`
	PlatformDetails    string          `xml:"platformDetails"`
	UsageOperation     string          `xml:"usageOperation"`
	DeprecationTime    string          `xml:"deprecationTime,omitempty"`
	StateReason        *xmlStateReason `xml:"stateReason,omitempty"`
	SourceInstanceID   string          `xml:"sourceInstanceId,omitempty"`
}

type xmlDescribeImages struct {
	XMLName   xml.Name   `xml:"DescribeImagesResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	RequestID string     `xml:"requestId"`
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

func renderDescribeImages(images []*Image, next string) response {
	doc := xmlDescribeImages{Xmlns: ec2Namespace, RequestID: requestID(), Images: []xmlImage{}, NextToken: next}
	for _, img := range images {
		x := xmlImage{
			ImageID:            img.ID,
			ImageLocation:      orDefault(img.OwnerAlias, img.OwnerID) + "/" + img.Name,
			ImageState:         orDefault(img.State, "available"),
			ImageOwnerID:       img.OwnerID,
			CreationDate:       img.CreationDate,
			IsPublic:           img.Public,
			Architecture:       img.Architecture,
			ImageType:          "machine",
			ImageOwnerAlias:    img.OwnerAlias,
			Name:               img.Name,
			Description:        img.Description,
			RootDeviceType:     orDefault(img.RootDeviceType, "ebs"),
			RootDeviceName:     img.RootDeviceName,
			VirtualizationType: orDefault(img.VirtualizationType, "hvm"),
			Hypervisor:         "xen",
			EnaSupport:         true,
			SriovNetSupport:    "simple",
			PlatformDetails:    "Linux/UNIX",
			UsageOperation:     "RunInstances",
			DeprecationTime:    img.DeprecationTime,
		}
		if img.RootDeviceName != "" || len(img.BlockDevices) > 0 {
			for _, bd := range imageBlockDevices(img) {
				if bd.NoDevice || bd.SnapshotID == "" {
					continue
				}
				x.BlockDeviceMapping = append(x.BlockDeviceMapping, xmlBDM{DeviceName: bd.DeviceName, EBS: xmlEBS{
					SnapshotID: bd.SnapshotID, VolumeSize: bd.VolumeSize, DeleteOnTermination: bd.DeleteOnTermination,
					VolumeType: orDefault(bd.VolumeType, "gp3"), Encrypted: bd.Encrypted,
				}})
			}
		}
		if img.StateReasonCode != "" {
			x.StateReason = &xmlStateReason{Code: img.StateReasonCode, Message: img.StateReasonMessage}
		}
		x.SourceInstanceID = img.SourceInstanceID
		if len(img.Tags) > 0 {
			keys := make([]string, 0, len(img.Tags))
			for k := range img.Tags {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			tags := make([]xmlTag, 0, len(keys))
			for _, k := range keys {
				tags = append(tags, xmlTag{k, img.Tags[k]})
			}
			x.TagSet = &tags
		}
		doc.Images = append(doc.Images, x)
	}
	b, err := xml.MarshalIndent(doc, "", "    ")
	if err != nil {
		return ec2Error(http.StatusInternalServerError, "InternalError", err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + string(b)}
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
