/* Symbol visibility for libmcpwarden: the library is built with -fvisibility=hidden and
 * only what carries MCPW_API is exported. Static builds and consumers of the static
 * archive define MCPW_STATIC (the CMake target and mcpwarden.pc do it for them). */
#ifndef MCPWARDEN_EXPORT_H
#define MCPWARDEN_EXPORT_H

#if defined(MCPW_STATIC)
#define MCPW_API
#elif defined(MCPW_BUILDING)
#define MCPW_API __attribute__((visibility("default")))
#else
#define MCPW_API
#endif

#endif
