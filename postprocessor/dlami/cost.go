package dlami

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

// The instance time of a bake: the amazon-ebs build instance the AMI was made from (EC2's
// LaunchTime to the termination EC2 gives in its StateTransitionReason, read through the AMI's
// SourceInstanceId), the verification's instances (their LaunchTime to the termination the
// cleanup saw), and the share of the NCCL test across nodes. Nothing is estimated: a time EC2
// does not give is reported unknown, with why.

// PricingAPI is the part of the Price List Query API client the post-processor uses.
type PricingAPI interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, optFns ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// PricingRegion is the Price List Query API endpoint the post-processor asks: the API answers
// at us-east-1 and ap-south-1 only, whatever region the prices are for.
const PricingRegion = "us-east-1"

// minimumBilledSeconds is EC2's per-second billing minimum for an On-Demand Linux instance.
const minimumBilledSeconds = 60

// priceBasis says what the dollars are.
const priceBasis = "On-Demand list price (Linux, shared tenancy) from the AWS Price List API, per second with a 60-second minimum per instance; Capacity Blocks, reservations, Savings Plans and Spot are billed differently"

func (c *Config) pricingClient(ctx context.Context) (PricingAPI, error) {
	sess, err := c.Connect(ctx, PricingRegion, time.Minute)
	if err != nil {
		return nil, err
	}
	return pricing.NewFromConfig(sess.Config, func(o *pricing.Options) { o.Region = PricingRegion }), nil
}

// ranNode is one verification instance's time, in its region.
type ranNode struct {
	region string
	launch.Lifetime
}

// reckon is the run's instance time per phase, with prices when price_lookup asks; it reads
// EC2 (and the Price List API) detached from a cancellation, each read bounded, but skips the
// reads when the run was cancelled.
func (p *PostProcessor) reckon(ctx context.Context, ec2For func(context.Context, string) (launch.EC2API, error), run *run, all map[string]string) report.Cost {
	c := &p.config
	now := time.Now().UTC()
	cost := report.Cost{BuildName: c.PackerBuildName, PluginVersion: version.PluginVersion.FormattedVersion(), GeneratedAt: now}
	cancelled := ctx.Err() != nil
	ctx = context.WithoutCancel(ctx)
	if cancelled {
		cost.Build = report.CostPhase{Unknown: "not read: the run was cancelled"}
	} else {
		cost.Build = p.buildPhase(ctx, ec2For, all, now)
	}
	cost.Verification = verificationPhase(run.ran, now)
	cost.MultiNode = c.multiNodePhase(run.ran)
	cost.InstanceSeconds = cost.Build.InstanceSeconds + cost.Verification.InstanceSeconds
	switch {
	case !c.PriceLookup:
		cost.Price = "not looked up (price_lookup = false)"
	case cancelled:
		cost.Price = "not looked up: the run was cancelled"
	default:
		p.price(ctx, &cost)
	}
	return cost
}

// buildPhase reads the build instance's time: the instance the AMI names as its source (the
// copy in the build's region does; copies made by CopyImage do not), described by EC2.
func (p *PostProcessor) buildPhase(ctx context.Context, ec2For func(context.Context, string) (launch.EC2API, error), all map[string]string, now time.Time) report.CostPhase {
	regions := slices.Sorted(maps.Keys(all))
	if r := p.config.Region; r != "" && all[r] != "" {
		// The build's own region first: its copy is the one made by CreateImage.
		regions = append([]string{r}, slices.DeleteFunc(regions, func(s string) bool { return s == r })...)
	}
	var why []string
	for _, region := range regions {
		api, err := ec2For(ctx, region)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", region, err))
			continue
		}
		source, _, err := launch.SourceInstance(ctx, api, all[region], p.patience())
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("%s: %v", region, err))
			continue
		case source == "":
			why = append(why, fmt.Sprintf("%s in %s names no source instance (SourceInstanceId: EC2 gives it for an AMI made by CreateImage, not a copy)", all[region], region))
			continue
		}
		l, err := launch.InstanceLifetime(ctx, api, source, p.patience())
		if err != nil {
			return report.CostPhase{Instances: []report.CostInstance{}, Unknown: fmt.Sprintf("%s, the instance %s was made from: %v", source, all[region], err)}
		}
		phase := report.CostPhase{Known: true}
		addInstance(&phase, costInstance(region, l, now))
		return phase
	}
	return report.CostPhase{Unknown: strings.Join(why, "; ")}
}

// verificationPhase is the verification's instances, every node of every region.
func verificationPhase(ran []ranNode, now time.Time) report.CostPhase {
	phase := report.CostPhase{Known: true}
	var unknown []string
	for _, n := range ran {
		if n.Launched.IsZero() {
			unknown = append(unknown, n.InstanceID+": EC2 gave no launch time")
			continue
		}
		addInstance(&phase, costInstance(n.region, n.Lifetime, now))
	}
	if len(unknown) > 0 {
		phase.Known, phase.Unknown = false, strings.Join(unknown, "; ")
	}
	return phase
}

// costInstance is one instance's time; one that had not ended is counted until now.
func costInstance(region string, l launch.Lifetime, now time.Time) report.CostInstance {
	launched := l.Launched
	ci := report.CostInstance{InstanceID: l.InstanceID, InstanceType: l.InstanceType, Region: region, LaunchTime: &launched,
		Seconds: math.Round(l.Duration(now).Seconds()*1000) / 1000, StillRunning: l.Running()}
	if !l.Running() {
		ended := l.Ended
		ci.EndTime = &ended
	}
	return ci
}

// addInstance counts one instance into a phase.
func addInstance(ph *report.CostPhase, ci report.CostInstance) {
	ph.Instances = append(ph.Instances, ci)
	ph.InstanceSeconds = math.Round((ph.InstanceSeconds+ci.Seconds)*1000) / 1000
}

// multiNodePhase is the share of the NCCL test across nodes: each node's time in the test, as
// the multi-node report of its region records it (launch.nodes[].test_seconds), for the nodes
// this run launched (a report an earlier run left in report_dir does not count). Nil when no
// test across nodes ran.
func (c *Config) multiNodePhase(ran []ranNode) *report.CostPhase {
	if !c.multi.On() {
		return nil
	}
	ours := map[string]ranNode{}
	var regions []string
	for _, n := range ran {
		ours[n.InstanceID] = n
		if !slices.Contains(regions, n.region) {
			regions = append(regions, n.region)
		}
	}
	var phase *report.CostPhase
	for _, region := range regions {
		data, err := os.ReadFile(filepath.Join(c.ReportDir, region, "multi-node", report.JSONFile))
		if err != nil {
			continue // not run in this region
		}
		var r report.Report
		if err := json.Unmarshal(data, &r); err != nil || r.Launch == nil {
			continue
		}
		for _, node := range r.Launch.Nodes {
			n, ok := ours[node.InstanceID]
			if !ok || n.region != region {
				continue
			}
			if phase == nil {
				phase = &report.CostPhase{Known: true}
			}
			addInstance(phase, report.CostInstance{InstanceID: node.InstanceID, InstanceType: cmp.Or(node.InstanceType, n.InstanceType), Region: region,
				Seconds: math.Round(node.TestSeconds*1000) / 1000})
		}
	}
	return phase
}

// price looks up the On-Demand list price per hour of every instance type and region in
// cost, and adds the dollars to each instance, each phase whose every instance is priced, and
// the whole when every phase is. What it cannot price is said in cost.Price.
func (p *PostProcessor) price(ctx context.Context, cost *report.Cost) {
	pricingFor := p.pricingFor
	if pricingFor == nil {
		pricingFor = p.config.pricingClient
	}
	cctx, cancel := context.WithTimeout(ctx, p.patience().Timeout+time.Minute)
	defer cancel()
	api, err := pricingFor(cctx)
	if err != nil {
		cost.Price = "not looked up: " + err.Error()
		return
	}
	phases := []*report.CostPhase{&cost.Build, &cost.Verification, cost.MultiNode}
	hourly := map[[2]string]float64{}
	var problems []string
	for _, ph := range phases {
		if ph == nil {
			continue
		}
		for _, ci := range ph.Instances {
			key := [2]string{ci.InstanceType, ci.Region}
			if _, ok := hourly[key]; ok || slices.ContainsFunc(problems, func(s string) bool { return strings.HasPrefix(s, key[0]+" in "+key[1]+":") }) {
				continue
			}
			usd, err := onDemandHourly(cctx, api, ci.InstanceType, ci.Region, p.patience())
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s in %s: %v", ci.InstanceType, ci.Region, err))
				continue
			}
			hourly[key] = usd
		}
	}
	total, whole := 0.0, cost.Build.Known && cost.Verification.Known
	for _, ph := range phases {
		if ph == nil {
			continue
		}
		sum, all := 0.0, true
		for i := range ph.Instances {
			ci := &ph.Instances[i]
			h, ok := hourly[[2]string{ci.InstanceType, ci.Region}]
			if !ok {
				all = false
				continue
			}
			usd := cents(h * max(ci.Seconds, minimumBilledSeconds) / 3600)
			ci.HourlyUSD, ci.USD = &h, &usd
			sum += usd
		}
		if all && ph.Known {
			v := cents(sum)
			ph.USD = &v
		}
		if ph != cost.MultiNode {
			whole = whole && all
			total += sum
		}
	}
	cost.Price = priceBasis
	if len(problems) > 0 {
		cost.Price += "; not priced: " + strings.Join(problems, "; ")
	}
	if whole {
		v := cents(total)
		cost.USD = &v
	}
}

// cents rounds dollars to the cent.
func cents(usd float64) float64 { return math.Round(usd*100) / 100 }

// onDemandHourly is the On-Demand price per hour, in USD, of a Linux instance of typ with
// shared tenancy in region, from the Price List API: every product matching the filters must
// carry one price per hour, and they must agree (several different prices are an error: the
// filters did not pin the product down).
func onDemandHourly(ctx context.Context, api PricingAPI, typ, region string, pat launch.Patience) (float64, error) {
	filters := []pricingtypes.Filter{}
	for _, f := range [][2]string{{"ServiceCode", "AmazonEC2"}, {"instanceType", typ}, {"regionCode", region}, {"operatingSystem", "Linux"},
		{"tenancy", "Shared"}, {"preInstalledSw", "NA"}, {"capacitystatus", "Used"}, {"licenseModel", "No License required"}} {
		filters = append(filters, pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(f[0]), Value: aws.String(f[1])})
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: filters, FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(100)}
	var prices []float64
	for pages := pricing.NewGetProductsPaginator(api, in); pages.HasMorePages(); {
		cctx, cancel := context.WithTimeout(ctx, cmp.Or(pat.CallTimeout, launch.CallTimeout))
		out, err := pages.NextPage(cctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("pricing:GetProducts: %w", err)
		}
		for _, entry := range out.PriceList {
			usd, err := ParseOnDemandHourly(entry)
			if err != nil {
				return 0, err
			}
			prices = append(prices, usd...)
		}
	}
	slices.Sort(prices)
	prices = slices.Compact(prices)
	switch len(prices) {
	case 0:
		return 0, errors.New("the Price List API lists no On-Demand hourly price for it")
	case 1:
		return prices[0], nil
	}
	return 0, fmt.Errorf("the Price List API lists %d different On-Demand hourly prices for it (%v)", len(prices), prices)
}

// ParseOnDemandHourly reads the On-Demand prices per hour, in USD, out of one GetProducts
// PriceList entry (a JSON document: terms.OnDemand.<term>.priceDimensions.<rate> with unit
// "Hrs" and pricePerUnit.USD). An entry that is not such a document is an error; one without
// an On-Demand hourly price gives none.
func ParseOnDemandHourly(entry string) ([]float64, error) {
	var doc struct {
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
		return nil, fmt.Errorf("a PriceList entry is not a price list document: %w", err)
	}
	var out []float64
	for _, term := range doc.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			if d.Unit != "Hrs" {
				continue
			}
			v, ok := d.PricePerUnit["USD"]
			if !ok {
				continue
			}
			usd, err := strconv.ParseFloat(v, 64)
			if err != nil || usd < 0 || math.IsInf(usd, 0) || math.IsNaN(usd) {
				return nil, fmt.Errorf("a PriceList entry's pricePerUnit.USD %q is not a price", v)
			}
			out = append(out, usd)
		}
	}
	return out, nil
}

// costLine is the UI's summary: "instance time: build 1 × p5.48xlarge 41m12s; verification
// 2 × p5.48xlarge 18m6s (multi-node test 2m20s of it); total 59m18s", with the dollars when
// they are known.
func costLine(c report.Cost) string { return c.Summary() }

// costTags are the AMI tags of the known phases: each phase's instance seconds, whole, and
// the build's instance type.
func costTags(c report.Cost) map[string]string {
	tags := map[string]string{}
	if c.Build.Known && len(c.Build.Instances) > 0 {
		tags[amitags.BuildInstanceSeconds] = strconv.FormatInt(int64(math.Round(c.Build.InstanceSeconds)), 10)
		tags[amitags.BuildInstanceType] = report.TypeCounts(c.Build.Instances)
		if len(c.Build.Instances) == 1 {
			tags[amitags.BuildInstanceType] = c.Build.Instances[0].InstanceType
		}
	}
	if c.Verification.Known && len(c.Verification.Instances) > 0 {
		tags[amitags.VerifyInstanceSeconds] = strconv.FormatInt(int64(math.Round(c.Verification.InstanceSeconds)), 10)
	}
	if c.MultiNode != nil && c.MultiNode.Known {
		tags[amitags.MultiNodeInstanceSeconds] = strconv.FormatInt(int64(math.Round(c.MultiNode.InstanceSeconds)), 10)
	}
	return tags
}

// reportCost writes report_dir/dlami-cost.json and prints the summary. Neither can fail the
// build: a file it cannot write is said.
func (p *PostProcessor) reportCost(ui packersdk.Ui, cost *report.Cost) {
	if cost == nil {
		return
	}
	if err := os.MkdirAll(p.config.ReportDir, 0o755); err != nil {
		ui.Error(fmt.Sprintf("dlami: writing %s: %v", report.CostFileName, err))
	} else if path, err := report.WriteCost(p.config.ReportDir, *cost); err != nil {
		ui.Error(fmt.Sprintf("dlami: writing %s: %v", path, err))
	}
	for _, dir := range p.addCostToReports(*cost) {
		ui.Error("dlami: adding the instance time to the report: " + dir)
	}
	ui.Say("dlami: " + costLine(*cost))
	if p.config.PriceLookup && cost.USD == nil {
		ui.Say("dlami: price: " + cost.Price)
	}
}

// addCostToReports puts the run's instance time into the verification's reports people read
// (report_dir/REGION and its multi-node report: JSON, Markdown and JUnit), now that it is
// known: they were written before the instances were gone. It returns what it could not do.
func (p *PostProcessor) addCostToReports(cost report.Cost) []string {
	var dirs []string
	for _, pattern := range []string{filepath.Join("*", report.JSONFile), filepath.Join("*", "multi-node", report.JSONFile)} {
		found, _ := filepath.Glob(filepath.Join(p.config.ReportDir, pattern)) // the patterns are valid
		for _, f := range found {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	var problems []string
	for _, dir := range dirs {
		if err := addCost(dir, cost); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
		}
	}
	return problems
}

// addCost rewrites the reports in dir with cost in them.
func addCost(dir string, cost report.Cost) error {
	data, err := os.ReadFile(filepath.Join(dir, report.JSONFile))
	if err != nil {
		return err
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("reading %s: %w", report.JSONFile, err)
	}
	r.Cost = &cost
	_, err = report.Write(dir, r)
	return err
}
