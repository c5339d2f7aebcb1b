// The row policies of every table, in the order the table calls them. A policy is
// registered here, once, by the lock its state lives under (policy.h); the order is the
// precedence of their decisions (a row coming back to the queue: a retry's delay, then
// death after MAX_DELIVERIES, then expiry; docs/architecture.md, "Policies").
#pragma once
#include "core/policy/dead_letters.h"
#include "core/policy/dedup.h"
#include "core/policy/delays.h"
#include "core/policy/expiry.h"
#include "core/policy/leases.h"
#include "core/policy/max_rows.h"
#include "core/policy/message_groups.h"
#include "core/policy/policy_set.h"
#include "core/policy/relay.h"
#include "core/policy/table_limits.h"

namespace q4m {

// Run by the group-commit leader, under the writer lock.
using WriterPolicies = PolicySet<Relay, Dedup, MaxRows>;
// Run under the state lock.
using RowPolicies = PolicySet<Delays, DeadLetters, Expiry, MessageGroups, TableLimits, Leases>;

}  // namespace q4m
