package awsfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Parameter is one SSM parameter.
type Parameter struct {
	Name         string    `json:"name"`
	Value        string    `json:"value"`
	Type         string    `json:"type,omitempty"`      // default "String"
	DataType     string    `json:"data_type,omitempty"` // default "text"
	Version      int64     `json:"version,omitempty"`   // default 1
	LastModified time.Time `json:"last_modified,omitempty"`
}

// PutParameter adds or replaces a parameter in a region.
func (s *Server) PutParameter(region string, p Parameter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := p
	s.region(region).params[p.Name] = &c
}

// GetParameterValue returns a parameter's value as stored, for tests.
func (s *Server) GetParameterValue(region, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.region(region).params[name]
	if p == nil {
		return "", false
	}
	return p.Value, true
}

// DeleteParameter removes a parameter from a region.
func (s *Server) DeleteParameter(region, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.region(region).params, name)
}

const ssmContentType = "application/x-amz-json-1.1"

type ssmProto struct{}

func ssmError(status int, typ, msg string) response {
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	return response{status: status, contentType: ssmContentType, body: string(b)}
}

func (ssmProto) throttle() response {
	return ssmError(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
}

func (ssmProto) serverError() response {
	return ssmError(http.StatusInternalServerError, "InternalServerError", "An internal error occurred.")
}

func (ssmProto) denied(account, op, resource string) response {
	return ssmError(http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf(
		"User: arn:aws:sts::%s:assumed-role/packer-ci/bake is not authorized to perform: ssm:%s on resource: %s because no identity-based policy allows the ssm:%s action",
		account, op, resource, op))
}

func (ssmProto) malformed() response {
	return response{status: http.StatusOK, contentType: ssmContentType, body: `{"Parameter":{"Name":"/aws/service/deeplearning/ami/x86_64/base-oss-nvid`}
}

// ssmParameterARN mirrors SSM: public parameters under /aws/service carry no
// account id in their ARN.
func ssmParameterARN(region, account, name string) string {
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	if strings.HasPrefix(name, "/aws/") {
		account = ""
	}
	return fmt.Sprintf("arn:%s:ssm:%s:%s:parameter%s", partition(region), region, account, name)
}

type ssmParameterJSON struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
}

func (s *Server) ssmParamJSON(region string, p *Parameter) ssmParameterJSON {
	out := ssmParameterJSON{
		ARN: ssmParameterARN(region, s.account, p.Name), DataType: p.DataType, Name: p.Name,
		Type: p.Type, Value: p.Value, Version: p.Version,
	}
	if out.DataType == "" {
		out.DataType = "text"
	}
	if out.Type == "" {
		out.Type = "String"
	}
	if out.Version == 0 {
		out.Version = 1
	}
	if !p.LastModified.IsZero() {
		// SSM sends epoch seconds with millisecond precision as a JSON number.
		out.LastModifiedDate = float64(p.LastModified.UnixMilli()) / 1000
	}
	return out
}

func jsonResponse(v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		return ssmError(http.StatusInternalServerError, "InternalServerError", err.Error())
	}
	return response{status: http.StatusOK, contentType: ssmContentType, body: string(b)}
}

func (s *Server) ssmRequest(target string, body []byte, scope CredentialScope, scopeErr error) (request, error) {
	op, ok := strings.CutPrefix(target, "AmazonSSM.")
	req := request{op: op, proto: ssmProto{}}
	if !ok || (op != OpGetParameter && op != OpGetParametersByPath) {
		return req, &wireError{ssmError(http.StatusBadRequest, "UnknownOperationException", "Unknown operation "+target)}
	}
	if scopeErr != nil {
		return req, &wireError{ssmError(http.StatusBadRequest, "MissingAuthenticationTokenException", scopeErr.Error())}
	}
	region := scope.Region
	switch op {
	case OpGetParameter:
		var in struct {
			Name           string
			WithDecryption bool
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
			return req, &wireError{ssmError(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")}
		}
		req.resource = ssmParameterARN(region, s.account, in.Name)
		req.handle = func() response {
			s.mu.Lock()
			defer s.mu.Unlock()
			p := s.region(region).params[in.Name]
			if p == nil {
				return ssmError(http.StatusBadRequest, "ParameterNotFound", "")
			}
			return jsonResponse(map[string]any{"Parameter": s.ssmParamJSON(region, p)})
		}
	case OpGetParametersByPath:
		var in struct {
			Path       string
			Recursive  bool
			MaxResults int
			NextToken  string
		}
		if err := json.Unmarshal(body, &in); err != nil || !strings.HasPrefix(in.Path, "/") {
			return req, &wireError{ssmError(http.StatusBadRequest, "ValidationException", "The parameter doesn't meet the parameter name requirements. The parameter name must begin with a forward slash \"/\".")}
		}
		if in.MaxResults == 0 {
			in.MaxResults = 10
		}
		if in.MaxResults < 1 || in.MaxResults > 10 {
			return req, &wireError{ssmError(http.StatusBadRequest, "ValidationException", fmt.Sprintf("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 10", in.MaxResults))}
		}
		req.resource = ssmParameterARN(region, s.account, in.Path)
		req.handle = func() response {
			s.mu.Lock()
			defer s.mu.Unlock()
			prefix := strings.TrimSuffix(in.Path, "/") + "/"
			var names []string
			for name := range s.region(region).params {
				rest, ok := strings.CutPrefix(name, prefix)
				if !ok || (!in.Recursive && strings.Contains(rest, "/")) {
					continue
				}
				names = append(names, name)
			}
			sort.Strings(names)
			// The EC2 Describe* paging, with SSM's error for a bad token.
			names, next, err := page(names, in.MaxResults, in.NextToken)
			if err != nil {
				return ssmError(http.StatusBadRequest, "InvalidNextToken", "The specified token isn't valid.")
			}
			params := []ssmParameterJSON{}
			for _, name := range names {
				params = append(params, s.ssmParamJSON(region, s.region(region).params[name]))
			}
			out := map[string]any{"Parameters": params}
			if next != "" {
				out["NextToken"] = next
			}
			return jsonResponse(out)
		}
	}
	return req, nil
}
