package awsfake

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// A CreateTags that would take a resource over EC2's 50 tags is refused whole: none of its
// tags is set.
func TestCreateTagsOverTheLimitSetsNothing(t *testing.T) {
	s := NewSeeded("us-east-1")
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKETAGS00000000", "secret", "")})
	account := s.State("us-east-1", false).Account
	s.PutImage("us-east-1", Image{ID: "ami-0000000000000f001", Name: "golden", OwnerID: account, Architecture: "x86_64"})
	var tags []types.Tag
	for i := range 48 {
		tags = append(tags, types.Tag{Key: aws.String(fmt.Sprintf("team:%d", i)), Value: aws.String("x")})
	}
	ctx := context.Background()
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"ami-0000000000000f001"}, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	more := []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("b"), Value: aws.String("2")}, {Key: aws.String("c"), Value: aws.String("3")}}
	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"ami-0000000000000f001"}, Tags: more})
	if awsaccess.APICode(err) != "TagLimitExceeded" {
		t.Fatalf("51 tags: %v", err)
	}
	for _, img := range s.State("us-east-1", false).Regions["us-east-1"].Images {
		if img.ID == "ami-0000000000000f001" && (len(img.Tags) != 48 || img.Tags["a"] != "") {
			t.Errorf("the refused call set tags: %d tags", len(img.Tags))
		}
	}
}
