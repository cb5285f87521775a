#pragma once
// The front door: everything a service needs to use dlock.

#include "dlock/config.hpp"
#include "dlock/default_service.hpp"
#include "dlock/distributed_mutex.hpp"
#include "dlock/errors.hpp"
#include "dlock/factory.hpp"
#include "dlock/hiredis_executor.hpp"
#include "dlock/lock_aware.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_key.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_service.hpp"
#include "dlock/lock_stats.hpp"
#include "dlock/logging.hpp"
#include "dlock/macros.hpp"
#include "dlock/prometheus_text.hpp"
#include "dlock/version.hpp"
