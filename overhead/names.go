package overhead

import "strings"

// Names is the shipped list of real-world-like names: popular sites'
// names of the kinds and lengths resolvers see most. The testbed's server
// answers any name, so nothing is looked up outside it.
var Names = strings.Fields(`google.com www.google.com youtube.com www.youtube.com facebook.com www.facebook.com
instagram.com www.instagram.com twitter.com x.com wikipedia.org en.wikipedia.org amazon.com www.amazon.com
yahoo.com www.yahoo.com reddit.com www.reddit.com linkedin.com www.linkedin.com netflix.com www.netflix.com
microsoft.com www.microsoft.com apple.com www.apple.com office.com login.microsoftonline.com bing.com
www.bing.com live.com outlook.live.com github.com api.github.com stackoverflow.com cloudflare.com
www.cloudflare.com whatsapp.com web.whatsapp.com tiktok.com www.tiktok.com zoom.us twitch.tv www.twitch.tv
ebay.com www.ebay.com paypal.com www.paypal.com adobe.com www.adobe.com dropbox.com www.dropbox.com
spotify.com open.spotify.com pinterest.com www.pinterest.com tumblr.com wordpress.com medium.com
imdb.com www.imdb.com cnn.com www.cnn.com bbc.co.uk www.bbc.co.uk nytimes.com www.nytimes.com
theguardian.com www.theguardian.com weather.com booking.com www.booking.com airbnb.com www.airbnb.com
fonts.googleapis.com fonts.gstatic.com ajax.googleapis.com www.googletagmanager.com www.google-analytics.com
connect.facebook.net static.xx.fbcdn.net scontent.xx.fbcdn.net i.ytimg.com yt3.ggpht.com s.yimg.com
cdn.jsdelivr.net cdnjs.cloudflare.com unpkg.com platform.twitter.com pbs.twimg.com abs.twimg.com
images-na.ssl-images-amazon.com m.media-amazon.com d1.awsstatic.com s3.amazonaws.com
mail.google.com drive.google.com docs.google.com maps.google.com accounts.google.com`)
