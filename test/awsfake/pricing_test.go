package awsfake

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

func pricingClient(t *testing.T, s *Server, region string) *pricing.Client {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return pricing.NewFromConfig(aws.Config{Region: region, BaseEndpoint: aws.String(hs.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEPRICING00000", "secret", "")})
}

func termMatch(kv ...string) []types.Filter {
	var out []types.Filter
	for i := 0; i < len(kv); i += 2 {
		out = append(out, types.Filter{Type: types.FilterTypeTermMatch, Field: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

// onDemandUSD reads the hourly USD prices out of PriceList entries, as a client does.
func onDemandUSD(t *testing.T, list []string) []string {
	t.Helper()
	var out []string
	for _, entry := range list {
		var doc struct {
			Product struct {
				Attributes map[string]string `json:"attributes"`
			} `json:"product"`
			Terms struct {
				OnDemand map[string]struct {
					PriceDimensions map[string]struct {
						Unit         string            `json:"unit"`
						PricePerUnit map[string]string `json:"pricePerUnit"`
					} `json:"priceDimensions"`
				} `json:"OnDemand"`
			} `json:"terms"`
		}
		if err := json.Unmarshal([]byte(entry), &doc); err != nil {
			t.Fatalf("a PriceList entry is not a JSON document: %v", err)
		}
		for _, term := range doc.Terms.OnDemand {
			for _, d := range term.PriceDimensions {
				if d.Unit == "Hrs" {
					out = append(out, d.PricePerUnit["USD"])
				}
			}
		}
	}
	return out
}

// GetProducts through the real SDK client: the filters a Linux On-Demand lookup sends find
// one product, leaving one out finds the others too, pages follow NextToken, and the API
// answers in its two endpoint regions only.
func TestGetProducts(t *testing.T) {
	s := NewSeeded("us-east-1")
	c := pricingClient(t, s, "us-east-1")
	ctx := context.Background()
	linux := termMatch("ServiceCode", "AmazonEC2", "instanceType", "p5.48xlarge", "regionCode", "us-east-1", "operatingSystem", "Linux",
		"tenancy", "Shared", "preInstalledSw", "NA", "capacitystatus", "Used", "licenseModel", "No License required")
	out, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: linux, FormatVersion: aws.String("aws_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := onDemandUSD(t, out.PriceList); !slices.Equal(got, []string{"55.0400000000"}) || aws.ToString(out.FormatVersion) != "aws_v1" {
		t.Errorf("Linux On-Demand p5.48xlarge: %q (%s)", got, aws.ToString(out.FormatVersion))
	}
	loose := termMatch("instanceType", "p5.48xlarge", "regionCode", "us-east-1", "operatingSystem", "Linux", "tenancy", "Shared", "preInstalledSw", "NA")
	var pages, products int
	for p := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: loose, MaxResults: aws.Int32(2)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages, products = pages+1, products+len(page.PriceList)
	}
	if pages != 2 || products != 3 {
		t.Errorf("without capacitystatus: %d products in %d pages, want 3 (used, unused and allocated reservation) in 2", products, pages)
	}
	none, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: termMatch("instanceType", "x9.nano")})
	if err != nil || len(none.PriceList) != 0 {
		t.Errorf("an unknown type: %d products, %v", len(none.PriceList), err)
	}
	_, err = pricingClient(t, s, "eu-west-1").GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
	if awsaccess.APICode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), "us-east-1 and ap-south-1") {
		t.Errorf("signed for eu-west-1: %v", err)
	}
	s.SetFault(OpGetProducts, "us-east-1", Fault{AccessDenied: true})
	_, err = c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
	if !awsaccess.IsAccessDenied(err) || !strings.Contains(err.Error(), "pricing:GetProducts") {
		t.Errorf("denied: %v", err)
	}
	if !slices.Contains(s.ActionsServed(), "pricing:GetProducts") {
		t.Errorf("served %q", s.ActionsServed())
	}
}
