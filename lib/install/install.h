/*
 * install.h - the installer: puts a verified bundle's artifacts into the cache tiers,
 * all or nothing; not installed.
 */
#ifndef MC_INSTALL_H
#define MC_INSTALL_H

#include "bundle/bundle.h"

#endif /* MC_INSTALL_H */
