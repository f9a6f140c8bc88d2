"""CrossGuard adapters: what the policy pack and the offline plan run. No rule logic here;
`collect` maps resources to rulebook calls, `pack` wraps the findings as policies."""
