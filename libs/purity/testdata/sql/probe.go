// Package sql is a probe: it breaks the purity rule on purpose.
package sql

import _ "database/sql"
