"""The cost of reading checkpoints from the hub, said before a sweep or a series starts (checkpoints/hub_costs.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from attnstruct.checkpoints import hub_costs, series
from attnstruct.checkpoints.hub_costs import Cost, Quota, checkpoint_cost


def test_calls_within_one_window_wait_for_none():
    quota = Quota("q", resolvers=10, api=5, window_s=60)
    assert Cost(resolver_calls=10, api_calls=5).windows(quota) == 1
    assert Cost(resolver_calls=10, api_calls=5).seconds(quota, request_s=0.0) == 0.0


def test_each_window_past_the_first_is_waited_whole_for_the_bucket_that_binds():
    quota = Quota("q", resolvers=10, api=5, window_s=60)
    assert Cost(resolver_calls=31, api_calls=5).windows(quota) == 4  # resolvers bind: ceil(31 / 10)
    assert Cost(resolver_calls=3, api_calls=11).windows(quota) == 3  # API binds: ceil(11 / 5)
    assert Cost(resolver_calls=31).seconds(quota, request_s=0.0) == 3 * 60


def test_the_transfers_bound_the_time_when_the_quota_does_not():
    cost = Cost(resolver_calls=4, api_calls=2, cdn_calls=14, bytes=25e6)
    seconds = cost.seconds(hub_costs.QUOTAS["anonymous"], workers=2, request_s=0.1, bytes_per_s=12.5e6)
    assert seconds == pytest.approx(20 * 0.1 / 2 + 2.0)


def test_a_checkpoint_costs_a_resolver_call_per_file_and_one_model_info():
    one = checkpoint_cost(n_layers=12, query_key_bytes=1e6)
    sharded = checkpoint_cost(n_layers=12, query_key_bytes=1e6, weight_files=3, sharded=True)
    assert (one.resolver_calls, one.api_calls, one.cdn_calls) == (2, 1, 2 + 12)  # config.json and the weights
    assert (sharded.resolver_calls, sharded.cdn_calls) == (1 + 1 + 3, 6 + 12)  # the index too; 2 index reads a shard


def test_a_fused_per_head_qkv_weight_costs_its_value_rows_too():
    assert checkpoint_cost(query_key_bytes=2e6, fused_per_head=True).bytes == 3e6
    assert checkpoint_cost(query_key_bytes=2e6).bytes == 2e6


def test_a_checkpoint_of_unknown_shape_has_unknown_bytes_and_the_summary_says_so():
    cost = hub_costs.sweep_cost(["org/a", "org/b@step1"])
    assert cost.checkpoints == 2 and math.isnan(cost.bytes)
    assert "bytes unknown until read" in cost.summary()


def test_local_paths_cost_no_request(tmp_path):
    assert hub_costs.sweep_cost([str(tmp_path), "org/a"]).checkpoints == 1


def test_a_series_is_costed_from_its_shapes_and_its_listings():
    pythia = series.TRAJECTORIES["pythia-160m"]
    entries = pd.DataFrame(
        [
            {"model": f"{run}@step{k}", "kind": "trajectory", "series": "pythia-160m", "unit": f"seed {s}"}
            for s, run in enumerate(pythia.runs[:2])
            for k in (0, 1000)
        ]
    )
    cost = hub_costs.series_cost(entries)
    assert cost.checkpoints == 4 and cost.api_calls == 4 + 2  # a model info each, a listing of each seed's repository
    assert cost.bytes == 4 * 1.5 * pythia.shape.query_key_bytes()


def test_the_summary_names_both_quotas_with_their_limits():
    line = Cost(checkpoints=3, resolver_calls=9000, api_calls=3).summary(workers=64)
    assert "anonymous quota (3,000 resolver, 500 API calls per 5 min) about 10.0 min" in line
    assert "free account (5,000 resolver, 1,000 API calls per 5 min) about 5.0 min" in line
