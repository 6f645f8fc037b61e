package awsfake

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The AWS Price List Query API's GetProducts (AWS JSON 1.1, X-Amz-Target
// AWSPriceListService.GetProducts, SigV4 signing name "pricing"), served for AmazonEC2
// instance products from a small built-in price list. Shapes, from the AWS CLI's documented
// example (aws-cli awscli/examples/pricing/get-products.rst) and the SDK's response snapshot
// (aws-sdk-go-v2 service/pricing response_snapshot/GetProducts.response.snap): the answer is
// {"FormatVersion":"aws_v1","PriceList":[...],"NextToken":...}, each PriceList entry a JSON
// document in a string, {"product":{"productFamily","attributes":{...},"sku"},"serviceCode",
// "terms":{"OnDemand":{"<sku>.JRTCKXETXF":{"priceDimensions":{"<sku>.JRTCKXETXF.6YS6EN2CT7":
// {"unit":"Hrs","pricePerUnit":{"USD":"..."},...}},...}}},"version","publicationDate"}.
//
// The API answers at two endpoints only, us-east-1 and ap-south-1 (the Billing User Guide's
// "AWS Price List Query API" endpoints); a request signed for any other region is refused here,
// as no endpoint would answer it there.

// OpGetProducts is the Price List Query API's GetProducts.
const OpGetProducts = "GetProducts"

// PricingRegions are the regions the Price List Query API answers in.
var PricingRegions = []string{"us-east-1", "ap-south-1"}

// onDemandUSDPerHour is the fake's price list: Linux, shared tenancy, On-Demand, per hour.
// These are the fake's own round figures for its tests, not AWS's prices, which change; the
// plugin reads whatever the API answers and holds no table of its own.
var onDemandUSDPerHour = map[string]float64{
	"p4d.24xlarge": 21.96, "p4de.24xlarge": 27.45, "p5.4xlarge": 6.88, "p5.48xlarge": 55.04,
	"p5e.48xlarge": 60.00, "p5en.48xlarge": 63.30, "p6-b200.48xlarge": 113.93, "p6-b300.48xlarge": 142.00,
	"g5.xlarge": 1.006, "g6.xlarge": 0.805, "g6e.xlarge": 1.861, "t3.micro": 0.0104,
}

// priceVariants are the other products of each instance type a real price list holds next to
// the Linux On-Demand one, with their own prices: a lookup that leaves out a filter finds
// several products and must not take one at random.
var priceVariants = []struct {
	attrs  map[string]string
	factor float64
}{
	{map[string]string{}, 1},
	{map[string]string{"operatingSystem": "Windows", "licenseModel": "No License required"}, 1.18},
	{map[string]string{"tenancy": "Dedicated"}, 1.1},
	{map[string]string{"preInstalledSw": "SQL Std"}, 1.3},
	{map[string]string{"capacitystatus": "UnusedCapacityReservation"}, 1},
	{map[string]string{"capacitystatus": "AllocatedCapacityReservation"}, 0},
}

// regionLocations are the price list's location names of the regions the fake seeds.
var regionLocations = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
	"eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)", "ap-northeast-1": "Asia Pacific (Tokyo)",
	"ap-south-1": "Asia Pacific (Mumbai)", "ap-northeast-3": "Asia Pacific (Osaka)",
}

// pricingProducts are every product of the fake's price list in region, in a stable order.
func pricingProducts(region string) []map[string]any {
	var out []map[string]any
	for _, typ := range sortedKeys(onDemandUSDPerHour) {
		for _, v := range priceVariants {
			attrs := map[string]string{
				"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "instanceType": typ,
				"instanceFamily": "GPU instance", "regionCode": region, "location": regionLocations[region], "locationType": "AWS Region",
				"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
				"licenseModel": "No License required", "operation": "RunInstances", "usagetype": "BoxUsage:" + typ,
			}
			for k, val := range v.attrs {
				attrs[k] = val
			}
			if attrs["location"] == "" {
				attrs["location"] = region
			}
			out = append(out, priceListEntry(attrs, onDemandUSDPerHour[typ]*v.factor))
		}
	}
	return out
}

// priceListEntry is one GetProducts PriceList document.
func priceListEntry(attrs map[string]string, usd float64) map[string]any {
	keys := sortedKeys(attrs)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s;", k, attrs[k])
	}
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	var sku strings.Builder
	for _, b := range h.Sum(nil)[:16] {
		sku.WriteByte(alphabet[int(b)%len(alphabet)])
	}
	term, rate := sku.String()+".JRTCKXETXF", sku.String()+".JRTCKXETXF.6YS6EN2CT7"
	price := strconv.FormatFloat(usd, 'f', 10, 64)
	return map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "attributes": attrs, "sku": sku.String()},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{term: map[string]any{
			"offerTermCode": "JRTCKXETXF", "sku": sku.String(), "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": map[string]any{},
			"priceDimensions": map[string]any{rate: map[string]any{
				"rateCode": rate, "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
				"description":  fmt.Sprintf("$%s per On Demand %s %s Instance Hour", price, attrs["operatingSystem"], attrs["instanceType"]),
				"pricePerUnit": map[string]string{"USD": price},
			}},
		}}},
		"version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
	}
}

type pricingProto struct{}

func pricingError(status int, typ, msg string) response {
	b, _ := json.Marshal(map[string]string{"__type": typ, "Message": msg})
	return response{status: status, contentType: ssmContentType, body: string(b)}
}

func (pricingProto) throttle() response {
	return pricingError(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
}

func (pricingProto) serverError() response {
	return pricingError(http.StatusInternalServerError, "InternalErrorException", "An internal error occurred.")
}

func (pricingProto) denied(account, op, _ string) response {
	return pricingError(http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf(
		"User: arn:aws:sts::%s:assumed-role/packer-ci/bake is not authorized to perform: pricing:%s because no identity-based policy allows the pricing:%s action",
		account, op, op))
}

func (pricingProto) malformed() response {
	return response{status: http.StatusOK, contentType: ssmContentType, body: `{"FormatVersion":"aws_v1","PriceList":["{\"product\":`}
}

// pricingFilter is one GetProducts filter.
type pricingFilter struct {
	Type, Field, Value string
}

func (s *Server) pricingRequest(target string, body []byte, scope CredentialScope, scopeErr error) (request, error) {
	op, _ := strings.CutPrefix(target, "AWSPriceListService.")
	req := request{op: op, proto: pricingProto{}}
	if op != OpGetProducts {
		return req, &wireError{pricingError(http.StatusBadRequest, "UnknownOperationException", "the fake serves GetProducts of the Price List Query API only, not "+target)}
	}
	if scopeErr != nil {
		return req, &wireError{pricingError(http.StatusBadRequest, "MissingAuthenticationTokenException", scopeErr.Error())}
	}
	if !slices.Contains(PricingRegions, scope.Region) {
		return req, &wireError{pricingError(http.StatusBadRequest, "InvalidParameterException",
			fmt.Sprintf("the Price List Query API answers in %s only; this request was signed for %s", strings.Join(PricingRegions, " and "), scope.Region))}
	}
	var in struct {
		ServiceCode   string
		Filters       []pricingFilter
		FormatVersion string
		MaxResults    int
		NextToken     string
	}
	if err := json.Unmarshal(body, &in); err != nil || in.ServiceCode == "" {
		return req, &wireError{pricingError(http.StatusBadRequest, "InvalidParameterException", "Input validation error: ServiceCode is required")}
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return req, &wireError{pricingError(http.StatusBadRequest, "InvalidParameterException", "Input validation error: FormatVersion must be aws_v1")}
	}
	if in.MaxResults < 0 || in.MaxResults > 100 {
		return req, &wireError{pricingError(http.StatusBadRequest, "InvalidParameterException", "Input validation error: MaxResults must be between 1 and 100")}
	}
	for _, f := range in.Filters {
		if f.Type != "TERM_MATCH" || f.Field == "" {
			return req, &wireError{pricingError(http.StatusBadRequest, "InvalidParameterException",
				fmt.Sprintf("Input validation error: filter %+v: the fake matches Type TERM_MATCH on a named Field", f))}
		}
	}
	req.resource = "*"
	req.handle = func() response {
		var matched []string
		if in.ServiceCode == "AmazonEC2" {
			for _, region := range FakeRegions() {
				for _, p := range pricingProducts(region) {
					if pricingMatch(p, in.Filters) {
						b, _ := json.Marshal(p)
						matched = append(matched, string(b))
					}
				}
			}
		}
		maxResults := in.MaxResults
		if maxResults == 0 {
			maxResults = 100
		}
		list, next, err := page(matched, maxResults, in.NextToken)
		if err != nil {
			return pricingError(http.StatusBadRequest, "InvalidNextTokenException", "The pagination token is invalid. Try again without a pagination token.")
		}
		out := map[string]any{"FormatVersion": "aws_v1", "PriceList": append([]string{}, list...)}
		if next != "" {
			out["NextToken"] = next
		}
		return jsonResponse(out)
	}
	return req, nil
}

// pricingMatch is TERM_MATCH on every filter: the field is ServiceCode or a product attribute,
// matched by name without regard to case, the value exactly.
func pricingMatch(p map[string]any, filters []pricingFilter) bool {
	attrs := p["product"].(map[string]any)["attributes"].(map[string]string)
	for _, f := range filters {
		if strings.EqualFold(f.Field, "ServiceCode") {
			if f.Value != p["serviceCode"] {
				return false
			}
			continue
		}
		found := false
		for k, v := range attrs {
			if strings.EqualFold(k, f.Field) {
				found = v == f.Value
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
